/**
 * A glob matcher that runs in time linear in the path: the pattern is
 * compiled to a nondeterministic automaton (Thompson's construction) and the
 * path is run through the set of its states at once, so no pattern can make
 * it backtrack. Matching costs at most (states × path length) steps.
 *
 * Syntax: `**` followed by "/" is any number of whole segments (`(.*\/)?`),
 * another `**` any characters, `*` any characters but "/", `?` one of them,
 * `[abc]` / `[a-z]` / `[!a]` one character of (or not of) a class (never
 * "/"), `{a,b}` either alternative (nested freely). A `[` or `{` without its
 * closing bracket, and a class with a backwards range (`[z-a]`), match as
 * the text they are. Every other character, `\` included, matches itself.
 */

/** One step of the automaton, while it is built: consume a character the test accepts, or move on without one. */
type State =
  | { readonly kind: "consume"; readonly accepts: Accepts; readonly next: number }
  | { readonly kind: "split"; readonly next: Array<number> }
  | { readonly kind: "accept" }

/** What a consuming state accepts: one code point, any but "/", anything, or a class. */
type Accepts = number | "notSlash" | "any" | ((code: number) => boolean)

const ACCEPT = 0
const CODE = 1
const NOT_SLASH = 2
const ANY = 3
const CLASS = 4
const SPLIT = 5

/** A glob compiled to an automaton, in flat arrays indexed by state; `start` is its first state. */
export interface Glob {
  readonly size: number
  readonly start: number
  readonly kind: Uint8Array
  /** The code point a CODE state accepts. */
  readonly code: Int32Array
  /** The state after a consuming one. */
  readonly next: Int32Array
  /** The states a SPLIT state moves on to, and the test of a CLASS state. */
  readonly splits: ReadonlyArray<ReadonlyArray<number> | undefined>
  readonly classes: ReadonlyArray<((code: number) => boolean) | undefined>
  /** The run `matches` reuses (it never runs twice at once: it does not yield). */
  readonly reused: Run
}

/**
 * A match under way: the set of consuming states the text read so far
 * leads to. Feed it text with {@link feed}, in as many pieces as wanted.
 */
export interface Run {
  current: Int32Array
  following: Int32Array
  count: number
  /** The generation each state was last added in, so a state is added once per character. */
  readonly seen: Int32Array
  readonly stack: Int32Array
  generation: number
}

/**
 * A token of a pattern. Read from text, each `*` is a `star` of its own;
 * runs of them are read as `**` (`anything`, or `segments` when a "/"
 * follows) only once the braces are known ({@link compileTokens}), so a run
 * that braces make (`*{*,}`) reads as the same run written out.
 */
export type Token =
  | { readonly kind: "char"; readonly code: number }
  | { readonly kind: "one" }
  | { readonly kind: "class"; readonly ranges: ReadonlyArray<readonly [number, number]>; readonly negated: boolean }
  | { readonly kind: "star" }
  | { readonly kind: "anything" }
  | { readonly kind: "segments" }
  | { readonly kind: "open" }
  | { readonly kind: "comma" }
  | { readonly kind: "close" }

const SLASH = 47

/** The class `[...]` starting at `start`, and where it ends; undefined when it is not a valid class. */
const classAt = (pattern: string, start: number): { readonly token: Token; readonly end: number } | undefined => {
  let i = start + 1
  const negated = pattern[i] === "!" || pattern[i] === "^"
  if (negated) i++
  const ranges: Array<readonly [number, number]> = []
  let first = true
  for (; i < pattern.length; i++) {
    const c = pattern.codePointAt(i)!
    if (c === 93 && !first) return { token: { kind: "class", ranges, negated }, end: i }
    first = false
    const width = c > 0xffff ? 2 : 1
    if (pattern[i + width] === "-" && i + width + 1 < pattern.length && pattern[i + width + 1] !== "]") {
      const to = pattern.codePointAt(i + width + 1)!
      if (to < c) return undefined
      ranges.push([c, to])
      i += width + (to > 0xffff ? 2 : 1)
    } else {
      ranges.push([c, c])
      i += width - 1
    }
  }
  return undefined
}

/** The tokens of a pattern, a `star` for each `*`; braces are marked as such only when they pair up. */
const tokenize = (pattern: string): Array<Token> => {
  const tokens: Array<Token> = []
  const literal = (text: string) => {
    for (const c of text) tokens.push({ kind: "char", code: c.codePointAt(0)! })
  }
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern[i]!
    if (c === "*") tokens.push({ kind: "star" })
    else if (c === "?") {
      tokens.push({ kind: "one" })
    } else if (c === "[") {
      const found = classAt(pattern, i)
      if (found === undefined) literal(c)
      else {
        tokens.push(found.token)
        i = found.end
      }
    } else if (c === "{") tokens.push({ kind: "open" })
    else if (c === "}") tokens.push({ kind: "close" })
    else if (c === ",") tokens.push({ kind: "comma" })
    else {
      const code = pattern.codePointAt(i)!
      tokens.push({ kind: "char", code })
      if (code > 0xffff) i++
    }
  }
  // pair the braces; an unpaired one, and a comma outside every pair, is text
  const open: Array<number> = []
  const paired = new Set<number>()
  tokens.forEach((token, index) => {
    if (token.kind === "open") open.push(index)
    else if (token.kind === "close" && open.length > 0) {
      paired.add(open.pop()!)
      paired.add(index)
    }
  })
  let depth = 0
  return tokens.map((token, index): Token => {
    if (token.kind === "open" || token.kind === "close") {
      if (!paired.has(index)) return { kind: "char", code: token.kind === "open" ? 123 : 125 }
      depth += token.kind === "open" ? 1 : -1
      return token
    }
    if (token.kind === "comma" && depth === 0) return { kind: "char", code: 44 }
    return token
  })
}

const inRanges = (ranges: ReadonlyArray<readonly [number, number]>, code: number): boolean => {
  for (const [from, to] of ranges) if (code >= from && code <= to) return true
  return false
}

/**
 * `tokens` with each run of `star`s read as text reads it: two by two as
 * `**` (`segments`, taking the "/" after it, when one follows at once), a
 * last odd one as `*`.
 */
const joinStars = (tokens: ReadonlyArray<Token>): Array<Token> => {
  const out: Array<Token> = []
  for (let i = 0; i < tokens.length; i++) {
    const token = tokens[i]!
    if (token.kind !== "star" || tokens[i + 1]?.kind !== "star") {
      out.push(token)
      continue
    }
    const after = tokens[i + 2]
    const slashAfter = after?.kind === "char" && after.code === SLASH
    out.push({ kind: slashAfter ? "segments" : "anything" })
    i += slashAfter ? 2 : 1
  }
  return out
}

/** A pattern's tokens as a tree: a run of tokens and brace groups, each group its alternatives. */
type Tree = ReadonlyArray<Token | ReadonlyArray<Tree>>

/** The tree of tokens whose braces pair up: each group, its alternatives split at its commas. */
const treeOf = (tokens: ReadonlyArray<Token>): Tree => {
  const stack: Array<{ alternatives: Array<Array<Token | ReadonlyArray<Tree>>> }> = [{ alternatives: [[]] }]
  for (const token of tokens) {
    const top = stack[stack.length - 1]!
    if (token.kind === "open") stack.push({ alternatives: [[]] })
    else if (token.kind === "comma") top.alternatives.push([])
    else if (token.kind === "close") {
      stack.pop()
      const parent = stack[stack.length - 1]!
      parent.alternatives[parent.alternatives.length - 1]!.push(top.alternatives)
    } else top.alternatives[top.alternatives.length - 1]!.push(token)
  }
  return stack[0]!.alternatives[0]!
}

/** What {@link expand} gives: the plain patterns, or which limit the pattern's braces go over. */
export type Expansion =
  | { readonly _tag: "Plains"; readonly plains: Array<Array<Token>> }
  | { readonly _tag: "TooMany" | "TooDeep" | "TooLarge" }

/**
 * The plain patterns (no braces) `pattern` stands for, as runs of tokens
 * (a `star` for each `*`), in order. What matches one of them is what
 * matches `pattern`. Refused past the limits, before the work or memory
 * they bound is spent: more than `alternatives` plain patterns, braces
 * nested deeper than `nesting` (the expansion recurses once per level), or
 * plain patterns whose tokens add up to more than `size`.
 */
export const expand = (
  pattern: string,
  limits: { readonly alternatives: number; readonly nesting: number; readonly size: number }
): Expansion => {
  if (pattern.length > limits.size) return { _tag: "TooLarge" }
  const tokens = tokenize(pattern)
  let depth = 0
  for (const token of tokens) {
    if (token.kind === "open" && ++depth > limits.nesting) return { _tag: "TooDeep" }
    if (token.kind === "close") depth--
  }
  const tooMany = { _tag: "TooMany" } as const
  const tooLarge = { _tag: "TooLarge" } as const
  /** The plain patterns of `tree`, or the limit they go over. */
  const all = (tree: Tree): Array<Array<Token>> | typeof tooMany | typeof tooLarge => {
    let out: Array<Array<Token>> = [[]]
    let size = 0
    for (const item of tree) {
      if (!Array.isArray(item)) {
        size += out.length
        if (size > limits.size) return tooLarge
        for (const plain of out) plain.push(item as Token)
        continue
      }
      const next: Array<Array<Token>> = []
      let nextSize = 0
      for (const alternative of item as ReadonlyArray<Tree>) {
        const tails = all(alternative)
        if (!Array.isArray(tails)) return tails
        for (const head of out) {
          for (const tail of tails) {
            nextSize += head.length + tail.length
            if (nextSize > limits.size) return tooLarge
            next.push([...head, ...tail])
          }
          if (next.length > limits.alternatives) return tooMany
        }
      }
      out = next
      size = nextSize
    }
    return out
  }
  const plains = all(treeOf(tokens))
  return Array.isArray(plains) ? { _tag: "Plains", plains } : plains
}

/**
 * The glob that matches what any of `plains` matches: plain patterns as
 * {@link expand} gives them (changed as the caller needs, braces left out).
 */
export const compileAny = (plains: ReadonlyArray<ReadonlyArray<Token>>): Glob => {
  const tokens: Array<Token> = [{ kind: "open" }]
  plains.forEach((plain, index) => {
    if (index > 0) tokens.push({ kind: "comma" })
    for (const token of plain) tokens.push(token)
  })
  tokens.push({ kind: "close" })
  return compileTokens(tokens)
}

/**
 * Compiles a glob. Work and memory are linear in the pattern's length;
 * braces are not expanded, so nesting costs nothing more.
 */
export const compile = (pattern: string): Glob => compileTokens(tokenize(pattern))

/** Compiles tokens whose braces pair up. */
const compileTokens = (read: ReadonlyArray<Token>): Glob => {
  const tokens = joinStars(read)
  const states: Array<State> = [{ kind: "accept" }]
  const add = (state: State): number => states.push(state) - 1
  /**
   * Compiles tokens[from, to) so that it continues at `next`, building
   * backwards; the alternatives of a brace group are the comma-separated
   * runs at its own depth.
   */
  const sequence = (from: number, to: number, next: number): number => {
    let current = next
    let i = to - 1
    while (i >= from) {
      const token = tokens[i]!
      if (token.kind === "close") {
        // find the group's opening brace and its commas (at this depth)
        let depth = 0
        const commas: Array<number> = []
        let j = i
        for (; j >= from; j--) {
          const t = tokens[j]!
          if (t.kind === "close") depth++
          else if (t.kind === "open" && --depth === 0) break
          else if (t.kind === "comma" && depth === 1) commas.push(j)
        }
        const bounds = [j, ...commas.reverse(), i]
        const starts: Array<number> = []
        for (let k = 0; k + 1 < bounds.length; k++) starts.push(sequence(bounds[k]! + 1, bounds[k + 1]!, current))
        current = add({ kind: "split", next: starts })
        i = j - 1
        continue
      }
      switch (token.kind) {
        case "char": {
          const code = token.code
          current = add({ kind: "consume", accepts: code, next: current })
          break
        }
        case "one":
          current = add({ kind: "consume", accepts: "notSlash", next: current })
          break
        case "class": {
          const { negated, ranges } = token
          current = add({
            kind: "consume",
            accepts: (c) => c !== SLASH && inRanges(ranges, c) !== negated,
            next: current
          })
          break
        }
        case "star":
        case "anything": {
          const loop = add({ kind: "split", next: [] })
          const step = add({ kind: "consume", accepts: token.kind === "anything" ? "any" : "notSlash", next: loop })
          ;(states[loop] as { next: Array<number> }).next.push(step, current)
          current = loop
          break
        }
        case "segments": {
          // (.*/)?: nothing, or any characters ending with "/"
          const slash = add({ kind: "consume", accepts: SLASH, next: current })
          const loop = add({ kind: "split", next: [] })
          const step = add({ kind: "consume", accepts: "any", next: loop })
          ;(states[loop] as { next: Array<number> }).next.push(step, slash)
          current = add({ kind: "split", next: [loop, current] })
          break
        }
        default:
          // an "open" or "comma" is only reached inside a group, handled above
          break
      }
      i--
    }
    return current
  }
  const start = sequence(0, tokens.length, 0)
  const size = states.length
  const kind = new Uint8Array(size)
  const code = new Int32Array(size)
  const next = new Int32Array(size)
  const splits: Array<ReadonlyArray<number> | undefined> = []
  const classes: Array<((code: number) => boolean) | undefined> = []
  states.forEach((state, s) => {
    if (state.kind === "accept") kind[s] = ACCEPT
    else if (state.kind === "split") {
      kind[s] = SPLIT
      splits[s] = state.next
    } else {
      next[s] = state.next
      const accepts = state.accepts
      if (typeof accepts === "number") {
        kind[s] = CODE
        code[s] = accepts
      } else if (accepts === "notSlash") kind[s] = NOT_SLASH
      else if (accepts === "any") kind[s] = ANY
      else {
        kind[s] = CLASS
        classes[s] = accepts
      }
    }
  })
  const glob = { size, start, kind, code, next, splits, classes } as Omit<Glob, "reused">
  return { ...glob, reused: begin(glob) }
}

/** Adds `state`, and every state it moves on to without consuming, to `into` from `count`; gives the new count. */
const close = (glob: Omit<Glob, "reused">, run: Run, state: number, into: Int32Array, count: number): number => {
  const { kind, splits } = glob
  const { generation, seen, stack } = run
  if (seen[state] === generation) return count
  seen[state] = generation
  let top = 0
  stack[top++] = state
  while (top > 0) {
    const s = stack[--top]!
    if (kind[s] !== SPLIT) {
      into[count++] = s
      continue
    }
    const targets = splits[s]!
    for (let k = targets.length - 1; k >= 0; k--) {
      const t = targets[k]!
      if (seen[t] === generation) continue
      seen[t] = generation
      stack[top++] = t
    }
  }
  return count
}

/** A new run of `glob`, before any text. */
export const begin = (glob: Omit<Glob, "reused">): Run => {
  const run: Run = {
    current: new Int32Array(glob.size),
    following: new Int32Array(glob.size),
    count: 0,
    seen: new Int32Array(glob.size).fill(-1),
    stack: new Int32Array(glob.size),
    generation: 0
  }
  return restart(glob, run)
}

const restart = (glob: Omit<Glob, "reused">, run: Run): Run => {
  if (run.generation > 0x3fffffff) {
    run.seen.fill(-1)
    run.generation = 0
  }
  run.generation++
  run.count = close(glob, run, glob.start, run.current, 0)
  return run
}

/**
 * Runs `text` from `from` to `to` (code units) through `run`; gives where
 * it stopped, past `to` when a code point straddles it. Steps: at most the
 * glob's states per character.
 */
export const feed = (glob: Glob, run: Run, text: string, from: number, to: number): number => {
  const { classes, code, kind, next } = glob
  const end = Math.min(to, text.length)
  let i = from
  for (; i < end && run.count > 0; i++) {
    const c = text.codePointAt(i)!
    if (c > 0xffff) i++
    run.generation++
    let count = 0
    for (let k = 0; k < run.count; k++) {
      const s = run.current[k]!
      const accepted = kind[s] === CODE
        ? code[s] === c
        : kind[s] === NOT_SLASH
        ? c !== SLASH
        : kind[s] === ANY || (kind[s] === CLASS && classes[s]!(c))
      if (accepted) count = close(glob, run, next[s]!, run.following, count)
    }
    const swap = run.current
    run.current = run.following
    run.following = swap
    run.count = count
  }
  return run.count === 0 ? text.length : Math.max(i, to)
}

/** Whether the text fed to `run` so far matches the whole glob. */
export const accepted = (glob: Glob, run: Run): boolean => {
  for (let k = 0; k < run.count; k++) if (glob.kind[run.current[k]!] === ACCEPT) return true
  return false
}

/** Whether the whole of `text` matches. Steps: at most the glob's states times the text's length. */
export const matches = (glob: Glob, text: string): boolean => {
  const run = restart(glob, glob.reused)
  feed(glob, run, text, 0, text.length)
  return accepted(glob, run)
}

/** What matching `text` against `glob` may cost, in steps: to decide when a long search yields. */
export const cost = (glob: Glob, text: string): number => glob.size * (text.length + 1)
