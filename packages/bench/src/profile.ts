/**
 * Reads a V8 `.cpuprofile` (written by `node --cpu-prof`) and summarises it:
 * self time per function, self time per area (Effect runtime, Schema,
 * @effect/ai, our core, …) and inclusive time of selected functions. Only
 * samples inside a time window (the measured workload, not start-up) count.
 *
 * @since 0.1.0
 */
import * as fs from "node:fs"

/**
 * @since 0.1.0
 * @category models
 */
export interface CallFrame {
  readonly functionName: string
  readonly url: string
  readonly lineNumber: number
  readonly columnNumber: number
}

/**
 * @since 0.1.0
 * @category models
 */
export interface ProfileNode {
  readonly id: number
  readonly callFrame: CallFrame
  readonly children?: ReadonlyArray<number>
}

/**
 * @since 0.1.0
 * @category models
 */
export interface CpuProfile {
  readonly nodes: ReadonlyArray<ProfileNode>
  readonly startTime: number
  readonly endTime: number
  readonly samples: ReadonlyArray<number>
  readonly timeDeltas: ReadonlyArray<number>
}

/**
 * A row of a summary: a function (or an area) and its time.
 *
 * @since 0.1.0
 * @category models
 */
export interface Row {
  readonly name: string
  readonly location: string
  readonly ms: number
  readonly percent: number
}

/**
 * @since 0.1.0
 * @category models
 */
export interface Summary {
  /** Sampled time inside the window. */
  readonly totalMs: number
  readonly samples: number
  readonly self: ReadonlyArray<Row>
  readonly areas: ReadonlyArray<Row>
  readonly inclusive: ReadonlyArray<Row>
}

/**
 * A short, stable location: the package and file under `node_modules`, or
 * the path inside the repository.
 *
 * @since 0.1.0
 * @category utility
 */
export const shortUrl = (url: string): string => {
  if (url === "") return ""
  const path = url.replace(/^file:\/\//, "")
  const nm = path.lastIndexOf("node_modules/")
  if (nm >= 0) return path.slice(nm + "node_modules/".length).replace(/\/(src|dist\/esm|dist\/cjs)\//, "/")
  const pkg = path.indexOf("/packages/")
  if (pkg >= 0) return path.slice(pkg + 1)
  return path
}

/**
 * The area a frame belongs to.
 *
 * @since 0.1.0
 * @category utility
 */
export const areaOf = (frame: CallFrame): string => {
  const url = frame.url
  if (url === "") {
    if (frame.functionName === "(garbage collector)") return "V8: garbage collection"
    if (frame.functionName === "(program)" || frame.functionName === "(idle)") return "V8: program / idle"
    return "V8 / Node built-ins"
  }
  if (url.includes("node_modules/@effect/ai/")) return "@effect/ai"
  if (url.includes("node_modules/effect/")) {
    return /\/(Schema|SchemaAST|ParseResult|internal\/schema\/[^/]+)\.(ts|js)$/.test(url)
      ? "effect: Schema / ParseResult"
      : "effect: runtime and data types"
  }
  if (url.includes("/packages/core/")) return "@stepwise-agent/core (the loop)"
  if (url.includes("/packages/bench/src/")) return "benchmark harness"
  if (url.startsWith("node:")) return "V8 / Node built-ins"
  return "other"
}

const keyOf = (frame: CallFrame) =>
  `${frame.functionName || "(anonymous)"}\u0000${frame.url}\u0000${frame.lineNumber}\u0000${frame.columnNumber}`

/**
 * Names a frame: its function name and `file:line`. Code that tsx compiled
 * on the fly (our packages) has one generated line and mostly anonymous
 * arrow functions; give {@link summarize} a `describe` that maps those back
 * through the source map (see {@link sourceMapDescriber}).
 *
 * @since 0.1.0
 * @category models
 */
export type Describe = (frame: CallFrame) => { readonly name: string; readonly location: string }

const defaultDescribe: Describe = (frame) => ({
  name: frame.functionName || "(anonymous)",
  location: frame.url === "" ? "" : `${shortUrl(frame.url)}:${frame.lineNumber + 1}`
})

/**
 * A {@link Describe} that resolves frames of files this process loaded
 * through tsx (same files, same transform as the profiled process) with
 * `module.findSourceMap`, naming anonymous functions after the first line of
 * their original source.
 *
 * @since 0.1.0
 * @category constructors
 */
export const sourceMapDescriber = (
  findSourceMap: (path: string) => { findEntry(line: number, column: number): object } | undefined
): Describe => {
  const sources = new Map<string, ReadonlyArray<string> | undefined>()
  const lines = (url: string) => {
    if (!sources.has(url)) {
      try {
        sources.set(url, fs.readFileSync(new URL(url), "utf8").split("\n"))
      } catch {
        sources.set(url, undefined)
      }
    }
    return sources.get(url)
  }
  return (frame) => {
    if (!frame.url.startsWith("file://") || frame.url.includes("/node_modules/")) return defaultDescribe(frame)
    const entry = findSourceMap(frame.url)?.findEntry(frame.lineNumber, frame.columnNumber) as
      | { readonly originalLine?: number; readonly originalSource?: string }
      | undefined
    if (entry?.originalLine === undefined) return defaultDescribe(frame)
    const line = entry.originalLine
    const text = lines(entry.originalSource ?? frame.url)?.[line]?.trim() ?? ""
    const declared = /^(?:export\s+)?(?:const|let|function\*?)\s+([A-Za-z0-9_$]+)/.exec(text)?.[1]
    const name = frame.functionName || declared || (text.length > 60 ? `${text.slice(0, 57)}...` : text) ||
      "(anonymous)"
    return { name, location: `${shortUrl(entry.originalSource ?? frame.url)}:${line + 1}` }
  }
}

/**
 * Reads a profile file.
 *
 * @since 0.1.0
 * @category constructors
 */
export const read = (path: string): CpuProfile => JSON.parse(fs.readFileSync(path, "utf8")) as CpuProfile

/**
 * Summarises the samples taken between `fromUs` and `toUs` (profile clock,
 * µs; `process.hrtime` uses the same monotonic clock on Linux).
 *
 * @since 0.1.0
 * @category constructors
 */
export const summarize = (
  profile: CpuProfile,
  options: {
    readonly fromUs?: number | undefined
    readonly toUs?: number | undefined
    readonly top?: number | undefined
    /** Functions whose inclusive time to report: a label, the function's name and a fragment of its location. */
    readonly inclusive?:
      | ReadonlyArray<{ readonly label: string; readonly name: string; readonly location?: string | undefined }>
      | undefined
    readonly describe?: Describe | undefined
  } = {}
): Summary => {
  const byId = new Map<number, ProfileNode>()
  const parent = new Map<number, number>()
  for (const node of profile.nodes) {
    byId.set(node.id, node)
    for (const child of node.children ?? []) parent.set(child, node.id)
  }
  const from = options.fromUs ?? Number.NEGATIVE_INFINITY
  const to = options.toUs ?? Number.POSITIVE_INFINITY
  const selfByKey = new Map<string, { id: number; us: number }>()
  const areaUs = new Map<string, number>()
  const describe = options.describe ?? defaultDescribe
  const described = new Map<number, { readonly name: string; readonly location: string }>()
  const describeNode = (id: number) => {
    let d = described.get(id)
    if (d === undefined) {
      d = describe(byId.get(id)!.callFrame)
      described.set(id, d)
    }
    return d
  }
  const wanted = options.inclusive ?? []
  const inclusiveUs = new Map<string, number>()
  let total = 0
  let count = 0
  let time = profile.startTime
  const samples = profile.samples
  const deltas = profile.timeDeltas
  for (let i = 0; i < samples.length; i++) {
    time += deltas[i]!
    // a sample stands for the time until the next one
    const duration = i + 1 < deltas.length ? deltas[i + 1]! : 0
    if (time < from || time > to || duration <= 0) continue
    const node = byId.get(samples[i]!)!
    const frame = node.callFrame
    if (frame.functionName === "(idle)") continue
    total += duration
    count++
    const key = keyOf(frame)
    const entry = selfByKey.get(key)
    if (entry === undefined) selfByKey.set(key, { id: node.id, us: duration })
    else entry.us += duration
    const area = areaOf(frame)
    areaUs.set(area, (areaUs.get(area) ?? 0) + duration)
    if (wanted.length > 0) {
      const seen = new Set<string>()
      for (let id: number | undefined = node.id; id !== undefined; id = parent.get(id)) {
        const d = describeNode(id)
        for (const w of wanted) {
          if (
            d.name === w.name && (w.location === undefined || d.location.includes(w.location)) && !seen.has(w.label)
          ) {
            seen.add(w.label)
            inclusiveUs.set(w.label, (inclusiveUs.get(w.label) ?? 0) + duration)
          }
        }
      }
    }
  }
  const pct = (us: number) => (total === 0 ? 0 : (100 * us) / total)
  // several generated positions may map to one original function: merge them
  const selfByName = new Map<string, { name: string; location: string; us: number }>()
  for (const { id, us } of selfByKey.values()) {
    const { location, name } = describeNode(id)
    const key = `${name}\u0000${location}`
    const entry = selfByName.get(key)
    if (entry === undefined) selfByName.set(key, { name, location, us })
    else entry.us += us
  }
  const self = [...selfByName.values()]
    .sort((a, b) => b.us - a.us)
    .slice(0, options.top ?? 25)
    .map(({ location, name, us }) => ({ name, location, ms: us / 1000, percent: pct(us) }))
  const areas = [...areaUs.entries()]
    .sort((a, b) => b[1] - a[1])
    .map(([name, us]) => ({ name, location: "", ms: us / 1000, percent: pct(us) }))
  const inclusive = wanted.map((w) => {
    const us = inclusiveUs.get(w.label) ?? 0
    return { name: w.label, location: w.location ?? "", ms: us / 1000, percent: pct(us) }
  })
  return { totalMs: total / 1000, samples: count, self, areas, inclusive }
}
