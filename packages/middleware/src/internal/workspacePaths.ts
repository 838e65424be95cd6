/**
 * Paths of a workspace: every path the model gives is a virtual path rooted
 * at "/", normalized here (`.` and empty segments dropped, `..` resolved), so
 * the backends only ever see paths inside their root. Also how `glob`, `grep`
 * and the access rules match paths (with the linear-time matcher of `glob.ts`).
 */
import * as Effect from "effect/Effect"
import * as Glob from "./glob.js"

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

const globCache = new Map<string, Glob.Glob>()

const hasGlobSyntax = (pattern: string): boolean => /[*?[{]/.test(pattern)

/** The compiled glob of `pattern`, from a bounded cache. */
const compiled = (pattern: string): Glob.Glob => {
  let cached = globCache.get(pattern)
  if (cached !== undefined) return cached
  cached = Glob.compile(pattern)
  if (globCache.size > 200) globCache.clear()
  globCache.set(pattern, cached)
  return cached
}

/**
 * Whether the normalized `path` matches a rule's pattern: a glob when it has
 * glob syntax (matched against the whole path), else a directory prefix.
 */
export const matchesRule = (pattern: string, path: string): boolean => {
  if (hasGlobSyntax(pattern)) return Glob.matches(compiled(pattern.startsWith("/") ? pattern : `/${pattern}`), path)
  const prefix = normalize(pattern)
  return prefix !== undefined && isWithin(path, prefix)
}

/** The text a glob given relative to `base` (or absolute, starting with "/") is matched against. */
const globSubject = (pattern: string, base: string, path: string): string =>
  pattern.startsWith("/") ? path : base === "/" ? path.slice(1) : path.slice(base.length + 1)

/** A few milliseconds of matching: the work done between two yields of a long search. */
const stepsBetweenYields = 50_000

/**
 * The paths among `files` (normalized, under `base`) that match `pattern`.
 * It yields to the other fibers after each stretch of work, so a long
 * search neither blocks the process nor outlives an interruption (a tool
 * timeout).
 */
export const filterMatching = (
  pattern: string,
  base: string,
  files: Iterable<string>
): Effect.Effect<Array<string>> =>
  Effect.gen(function*() {
    const glob = compiled(pattern)
    const out: Array<string> = []
    let steps = 0
    for (const file of files) {
      const subject = globSubject(pattern, base, file)
      const cost = Glob.cost(glob, subject)
      if (cost > stepsBetweenYields) {
        // a long path: matched in pieces, yielding between them
        const run = Glob.begin(glob)
        const piece = Math.max(1, Math.floor(stepsBetweenYields / glob.size))
        for (let at = 0; at < subject.length;) {
          yield* Effect.yieldNow()
          at = Glob.feed(glob, run, subject, at, at + piece)
        }
        if (Glob.accepted(glob, run)) out.push(file)
        continue
      }
      steps += cost
      if (steps > stepsBetweenYields) {
        steps = 0
        yield* Effect.yieldNow()
      }
      if (Glob.matches(glob, subject)) out.push(file)
    }
    return out
  })
