/**
 * Paths of a workspace: every path the model gives is a virtual path rooted
 * at "/", normalized here (`.` and empty segments dropped, `..` resolved), so
 * the backends only ever see paths inside their root. Also the glob matcher
 * used by `glob`, `grep` and the access rules.
 */

/** The normalized form of `path` ("/a/b"), or `undefined` when `..` climbs above the root or it holds a NUL. */
export const normalize = (path: string): string | undefined => {
  if (path.includes("\0")) return undefined
  const out: Array<string> = []
  for (const segment of path.replace(/\\/g, "/").split("/")) {
    if (segment === "" || segment === ".") continue
    if (segment === "..") {
      if (out.length === 0) return undefined
      out.pop()
    } else {
      out.push(segment)
    }
  }
  return `/${out.join("/")}`
}

/** Whether `path` is `directory` or inside it (both normalized). */
export const isWithin = (path: string, directory: string): boolean =>
  directory === "/" || path === directory || path.startsWith(`${directory}/`)

const globCache = new Map<string, RegExp>()

const hasGlobSyntax = (pattern: string): boolean => /[*?[{]/.test(pattern)

const isValidClass = (set: string): boolean => {
  try {
    new RegExp(set)
    return true
  } catch {
    return false
  }
}

/**
 * The regular expression of a glob: `**` any number of segments, `*` any
 * characters but "/", `?` one of them, `[...]` a class, `{a,b}` either.
 */
export const globRegExp = (pattern: string): RegExp => {
  let cached = globCache.get(pattern)
  if (cached !== undefined) return cached
  let source = ""
  let braces = 0
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern[i]!
    if (c === "*") {
      if (pattern[i + 1] === "*") {
        const slashAfter = pattern[i + 2] === "/"
        const any = slashAfter ? "(?:.*/)?" : ".*"
        // "**/**/" matches what "**/" does; repeated, it would backtrack polynomially on long paths
        if (!source.endsWith(any)) source += any
        i += slashAfter ? 2 : 1
      } else {
        source += "[^/]*"
      }
    } else if (c === "?") {
      source += "[^/]"
    } else if (c === "[") {
      const end = pattern.indexOf("]", i + 1)
      if (end === -1) source += "\\["
      else {
        const body = pattern.slice(i + 1, end).replace(/\\/g, "\\\\")
        const set = `[${body.startsWith("!") ? `^${body.slice(1)}` : body}]`
        // a class the model wrote backwards ("[z-a]") is not a class: it matches as the text it is
        source += isValidClass(set) ? set : pattern.slice(i, end + 1).replace(/[.*+?^$()|[\]\\{}]/g, "\\$&")
        i = end
      }
    } else if (c === "{") {
      braces++
      source += "(?:"
    } else if (c === "}" && braces > 0) {
      braces--
      source += ")"
    } else if (c === "," && braces > 0) {
      source += "|"
    } else {
      source += c.replace(/[.+^$()|\\\]}]/g, "\\$&")
    }
  }
  cached = new RegExp(`^${source}${")".repeat(braces)}$`)
  if (globCache.size > 1000) globCache.clear()
  globCache.set(pattern, cached)
  return cached
}

/**
 * Whether the normalized `path` matches a rule's pattern: a glob when it has
 * glob syntax (matched against the whole path), else a directory prefix.
 */
export const matchesRule = (pattern: string, path: string): boolean => {
  if (hasGlobSyntax(pattern)) return globRegExp(pattern.startsWith("/") ? pattern : `/${pattern}`).test(path)
  const prefix = normalize(pattern)
  return prefix !== undefined && isWithin(path, prefix)
}

/**
 * Whether `path` (normalized, under `base`) matches a glob `pattern` given
 * relative to `base` (or absolute, starting with "/").
 */
export const matchesGlob = (pattern: string, base: string, path: string): boolean => {
  if (pattern.startsWith("/")) return globRegExp(pattern).test(path)
  const relative = base === "/" ? path.slice(1) : path.slice(base.length + 1)
  return globRegExp(pattern).test(relative)
}
