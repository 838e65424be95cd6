/**
 * Renders the benchmark results as Markdown and writes them between the
 * markers of `docs/benchmarks.md`, keeping the hand-written text around them.
 *
 * @since 0.1.0
 */
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { type AblationResult, processSets } from "./ablation.js"
import * as Context from "./context.js"
import type { DurableResult } from "./durable.js"
import type { Mode } from "./fakes.js"
import type { Config } from "./fixtures.js"
import type { LangChainConfig } from "./langchain.js"
import { linearFit, type Sample, type SampleOptions } from "./measure.js"
import type { FirstLoadResult, MemoryResult, StepResult } from "./memory.js"
import type { MicroResult } from "./micro.js"
import * as Peers from "./peers.js"
import * as PiiBench from "./pii.js"
import type { Summary } from "./profile.js"
import * as Replay from "./replay.js"
import * as Scale from "./scale.js"
import * as Steering from "./steering.js"

/**
 * @since 0.1.0
 * @category models
 */
export interface Machine {
  readonly date: string
  readonly cpu: string
  readonly cores: number
  readonly memoryGiB: number
  readonly node: string
  readonly versions: Readonly<Record<string, string>>
  readonly loadStart: ReadonlyArray<number>
}

/**
 * @since 0.1.0
 * @category models
 */
export interface ConfigResult {
  readonly config: Config
  readonly result: Sample
}

/**
 * @since 0.1.0
 * @category models
 */
export interface BareResult {
  readonly what: "generateText" | "streamText" | "Toolkit.handle"
  /** Which build of @effect/ai: `installed, <state>`, `as published` or `patched`. */
  readonly build: string
  readonly tools: number
  readonly result: Sample
}

/**
 * One configuration of LangChain JS's `createAgent` (see `langchain.ts`).
 *
 * @since 0.1.0
 * @category models
 */
export interface LangChainResult {
  readonly config: LangChainConfig
  readonly result: Sample
}

/**
 * @since 0.1.0
 * @category models
 */
export interface ProfileResult {
  readonly model: string
  /** The other build of @effect/ai, when the profile ran on it. */
  readonly build: string | undefined
  readonly seconds: number
  readonly runs: number
  readonly steps: number
  readonly summary: Summary
}

/**
 * @since 0.1.0
 * @category models
 */
export interface Results {
  readonly machine: Machine & { readonly loadEnd: ReadonlyArray<number>; readonly elapsedSeconds: number }
  readonly quick: boolean
  readonly sampling: SampleOptions
  readonly middleware: { readonly encoded: ReadonlyArray<ConfigResult>; readonly raw: ReadonlyArray<ConfigResult> }
  readonly tools: {
    readonly encoded: ReadonlyArray<ConfigResult>
    readonly raw: ReadonlyArray<ConfigResult>
    /** Generate rows on the other build of @effect/ai (see `effectAi.ts`). */
    readonly other: ReadonlyArray<ConfigResult>
  }
  readonly effectAi: {
    readonly installed: string
    readonly patchFile: string | undefined
    readonly other: string | undefined
    readonly note: string | undefined
  }
  /** LangChain JS's `createAgent` on the same workload, same run; absent with `--no-langchain`. */
  readonly langchain?: {
    readonly sampling: Omit<SampleOptions, "unitsPerRun">
    readonly results: ReadonlyArray<LangChainResult>
  } | undefined
  /** The AI SDK 7 and the floor beside our step, interleaved (see `peers.ts`); absent with `--no-aisdk`. */
  readonly peers?: Peers.PeersResult | undefined
  readonly bare: ReadonlyArray<BareResult>
  readonly micro: ReadonlyArray<MicroResult>
  readonly ablation: ReadonlyArray<AblationResult>
  readonly memory: MemoryResult
  readonly steps: ReadonlyArray<StepResult>
  /** One more step at 10 and 10,000 messages per message size and start, memory and KeyValueStore (absent in older results). */
  readonly flatSteps?: ReadonlyArray<StepResult> | undefined
  /** The first load of a long thread from a KeyValueStore (absent in older results). */
  readonly firstLoad?: ReadonlyArray<FirstLoadResult> | undefined
  readonly profiles: ReadonlyArray<ProfileResult>
  /** Context editing, summarization and token counting (see `context.ts`); absent with `--no-context`. */
  readonly context?: Context.ContextResult | undefined
  /** Durable mode: per step, per activity, resume after a crash (see `durable.ts`); absent with `--no-durable`. */
  readonly durable?: DurableResult | undefined
  /** Streamed PII redaction (see `pii.ts`); absent with `--no-pii`. */
  readonly pii?: PiiBench.PiiResult | undefined
  /** What a steer message adds to a step (see `steering.ts`); absent with `--no-steering`. */
  readonly steering?: Steering.SteeringResult | undefined
  /** Idle threads and concurrent runs on one agent (see `scale.ts`); absent with `--no-scale`. */
  readonly scale?: Scale.ScaleResult | undefined
  /** Replay and record cost per step, and a fork of a long thread (see `replay.ts`); absent with `--no-replay`. */
  readonly replay?: { readonly replay: Replay.ReplayResult; readonly fork: Replay.ForkResult } | undefined
}

const versionOf = (root: string, pkg: string): string => {
  try {
    return (JSON.parse(fs.readFileSync(path.join(root, "node_modules", pkg, "package.json"), "utf8")) as {
      version: string
    }).version
  } catch {
    return "?"
  }
}

/**
 * Describes this machine: `nproc`, the CPU model from `/proc/cpuinfo`, memory,
 * node and the versions of the pinned stack.
 *
 * @since 0.1.0
 * @category constructors
 */
export const describeMachine = (root: string): Machine => {
  let cpu = os.cpus()[0]?.model ?? "unknown"
  try {
    const line = fs.readFileSync("/proc/cpuinfo", "utf8").split("\n").find((l) => l.startsWith("model name"))
    if (line !== undefined) cpu = line.split(":").slice(1).join(":").trim()
  } catch {
    // not Linux: keep os.cpus()
  }
  const nproc = spawnSync("nproc", { encoding: "utf8" })
  const cores = nproc.status === 0 ? Number(nproc.stdout.trim()) : os.availableParallelism()
  return {
    date: new Date().toISOString(),
    cpu,
    cores,
    memoryGiB: os.totalmem() / 2 ** 30,
    node: process.version,
    versions: Object.fromEntries(
      ["effect", "@effect/ai", "tsx", "langchain", "@langchain/core", "@langchain/langgraph", "zod", "ai7"].map((
        pkg
      ) => [pkg, versionOf(root, pkg)])
    ),
    loadStart: os.loadavg()
  }
}

/**
 * Formats microseconds: `812 µs`, `3.41 ms`, `23.8 ms`.
 *
 * @since 0.1.0
 * @category utility
 */
export const us = (value: number): string =>
  Number.isNaN(value)
    ? "—"
    : Math.abs(value) >= 10_000
    ? `${(value / 1000).toFixed(1)} ms`
    : Math.abs(value) >= 1000
    ? `${(value / 1000).toFixed(2)} ms`
    : Math.abs(value) >= 100
    ? `${value.toFixed(0)} µs`
    : `${value.toFixed(1)} µs`

const bytes = (value: number): string =>
  Math.abs(value) >= 2 ** 20 ? `${(value / 2 ** 20).toFixed(1)} MiB` : `${(value / 1024).toFixed(0)} KiB`

const table = (head: ReadonlyArray<string>, rows: ReadonlyArray<ReadonlyArray<string>>): string =>
  [
    `| ${head.join(" | ")} |`,
    `|${head.map((_, i) => (i === 0 ? "---" : "---:")).join("|")}|`,
    ...rows.map((row) => `| ${row.join(" | ")} |`)
  ].join("\n")

const find = (
  results: ReadonlyArray<ConfigResult>,
  match: Partial<Config>
): ConfigResult | undefined =>
  results.find((r) => (Object.keys(match) as Array<keyof Config>).every((k) => r.config[k] === match[k]))

const findLangChain = (results: Results, match: Partial<LangChainConfig>): Sample | undefined =>
  results.langchain?.results.find((r) =>
    (Object.keys(match) as Array<keyof LangChainConfig>).every((k) => r.config[k] === match[k])
  )?.result

/** `LangChain ÷ ours` as `12×` (or `0.8×`); `—` when either side is missing. */
const ratio = (theirs: number | undefined, ours: number | undefined): string =>
  theirs === undefined || ours === undefined || Number.isNaN(theirs) || Number.isNaN(ours)
    ? "—"
    : `${(theirs / ours).toFixed(theirs / ours >= 10 ? 0 : 1)}×`

const modelTitle = (model: string) =>
  model === "encoded"
    ? "`LanguageModel.make` fake (canned encoded parts; @effect/ai decodes every reply)"
    : "raw fake (decoded parts; no @effect/ai work on the model call)"

const middlewareSection = (results: Results): string => {
  const out: Array<string> = []
  const counts = [0, 1, 5, 10]
  for (const model of ["encoded", "raw"] as const) {
    const list = results.middleware[model]
    const rows: Array<Array<string>> = []
    for (const mode of ["generate", "stream"] as const) {
      for (const steps of [10, 100]) {
        const cells = counts.map((middleware) => find(list, { mode, steps, middleware })?.result.cpuUs ?? NaN)
        const fit = linearFit(counts, cells)
        const theirs = (middleware: number) =>
          steps === 10 ? findLangChain(results, { mode, middleware, tools: 1 })?.cpuUs : undefined
        rows.push([
          `${mode} · ${steps} steps`,
          ...cells.map(us),
          us(fit.slope),
          us(fit.slope / 4),
          steps === 10 && results.langchain !== undefined
            ? `${ratio(theirs(0), cells[0])} / ${ratio(theirs(10), cells[3])}`
            : "—"
        ])
      }
    }
    out.push(`### ${modelTitle(model)}\n`)
    out.push(
      table([
        "mode · run length",
        "0 mw",
        "1 mw",
        "5 mw",
        "10 mw",
        "+ per middleware",
        "+ per hook call",
        "LangChain ÷ ours (0 / 10 mw)"
      ], rows)
    )
    out.push("")
  }
  out.push(
    "LangChain ÷ ours: LangChain JS `createAgent`'s CPU per step on the same workload, measured in this run " +
      "(10-step runs only; see \"Against LangChain JS `createAgent`\" in section 2).\n"
  )
  const wallRows: Array<Array<string>> = []
  for (const model of ["encoded", "raw"] as const) {
    for (const mode of ["generate", "stream"] as const) {
      for (const steps of [10, 100]) {
        wallRows.push([
          `${model} · ${mode} · ${steps} steps`,
          ...counts.map((middleware) => {
            const r = find(results.middleware[model], { mode, steps, middleware })?.result
            return r === undefined ? "" : `${us(r.wallUs)} (${us(r.minUs)})`
          })
        ])
      }
    }
  }
  out.push("<details><summary>Wall clock per step: median (best batch)</summary>\n")
  out.push(table(["model · mode · run length", "0 mw", "1 mw", "5 mw", "10 mw"], wallRows))
  out.push("\n</details>")
  return out.join("\n")
}

const toolsSection = (results: Results): string => {
  const out: Array<string> = []
  const sizes = [1, 5, 20, 50]
  const ai = results.effectAi
  const installed = `installed, ${ai.installed}`
  const rows: Array<Array<string>> = []
  for (const model of ["encoded", "raw"] as const) {
    for (const mode of ["generate", "stream"] as const) {
      for (const middleware of [0, 10]) {
        rows.push([
          `${model === "encoded" ? `encoded (${installed})` : "raw"} · ${mode} · ${middleware} mw`,
          ...sizes.map((tools) => us(find(results.tools[model], { mode, middleware, tools })?.result.cpuUs ?? NaN))
        ])
      }
      if (model === "encoded" && mode === "generate" && ai.other !== undefined) {
        for (const middleware of [0, 10]) {
          rows.push([
            `encoded (**${ai.other}**) · generate · ${middleware} mw`,
            ...sizes.map((tools) => us(find(results.tools.other, { middleware, tools })?.result.cpuUs ?? NaN))
          ])
        }
      }
    }
  }
  if (results.langchain !== undefined) {
    for (const mode of ["generate", "stream"] as const) {
      for (const middleware of [0, 10]) {
        rows.push([
          `**LangChain JS \`createAgent\`** · ${mode} · ${middleware} mw`,
          ...sizes.map((tools) => us(findLangChain(results, { mode, middleware, tools })?.cpuUs ?? NaN))
        ])
      }
    }
  }
  out.push(table(["model · mode · middleware", "1 tool", "5 tools", "20 tools", "50 tools"], rows))
  out.push("")
  out.push(
    "Bare @effect/ai calls on the `LanguageModel.make` fake (one reply with one tool call; CPU per call; " +
      "`streamText` drained in the calling fiber, as the loop drains a model's stream, not with `Stream.runDrain`, " +
      "which forks):\n"
  )
  const builds = [installed, ...(ai.other === undefined ? [] : [ai.other])]
  const bare = (what: BareResult["what"], build: string, tools: number) =>
    results.bare.find((b) => b.what === what && b.build === build && b.tools === tools)
  const bareRows: Array<Array<string>> = []
  for (const build of builds) {
    for (const what of ["generateText", "streamText"] as const) {
      bareRows.push([
        `\`${what}\` (disableToolCallResolution), ${build === installed ? build : `**${build}**`}`,
        ...[0, 1, 5, 20, 50].map((tools) => us(bare(what, build, tools)?.result.cpuUs ?? NaN))
      ])
    }
  }
  bareRows.push([
    "`Toolkit.handle` (one call of `tool_0`)",
    "",
    us(bare("Toolkit.handle", installed, 1)?.result.cpuUs ?? NaN),
    "",
    "",
    us(bare("Toolkit.handle", installed, 50)?.result.cpuUs ?? NaN)
  ])
  out.push(table(["call", "no toolkit", "1 tool", "5 tools", "20 tools", "50 tools"], bareRows))
  out.push("")
  out.push(
    "Where a step goes (encoded fake on the installed build, 0 middleware): the step, the bare `@effect/ai` model " +
      "call inside it, and what is left for our loop plus the tool call (`Toolkit.handle` included):\n"
  )
  const split: Array<Array<string>> = []
  for (const mode of ["generate", "stream"] as const) {
    for (const tools of sizes) {
      const step = find(results.tools.encoded, { mode, middleware: 0, tools })?.result.cpuUs ?? NaN
      const model = bare(mode === "generate" ? "generateText" : "streamText", installed, tools)?.result.cpuUs ?? NaN
      const raw = find(results.tools.raw, { mode, middleware: 0, tools })?.result.cpuUs ?? NaN
      split.push([
        `${mode} · ${tools} tools`,
        us(step),
        `${us(model)} (${((100 * model) / step).toFixed(0)}%)`,
        us(step - model),
        us(raw)
      ])
    }
  }
  out.push(table([
    "mode · tools",
    "step (encoded)",
    "bare model call",
    "step − model call",
    "step on the raw fake"
  ], split))
  return out.join("\n")
}

const langchainSection = (results: Results): string => {
  const lc = results.langchain
  if (lc === undefined) return "_Not run (`--no-langchain`)._"
  const v = results.machine.versions
  const s = lc.sampling
  const sizes = [1, 5, 20, 50]
  const modes: ReadonlyArray<Mode> = ["generate", "stream"]
  const ours = (mode: Mode, middleware: number, tools: number) =>
    find(results.tools.encoded, { mode, middleware, tools })?.result
  const raw = (mode: Mode, middleware: number, tools: number) =>
    find(results.tools.raw, { mode, middleware, tools })?.result
  const theirs = (mode: Mode, middleware: number, tools: number) => findLangChain(results, { mode, middleware, tools })
  const out: Array<string> = [
    `LangChain JS \`createAgent\` (langchain ${v["langchain"]}, @langchain/core ${v["@langchain/core"]}, ` +
    `@langchain/langgraph ${v["@langchain/langgraph"]}, zod ${v["zod"]}) runs the same workload in the same ` +
    "process, right after the tables above (`packages/bench/src/langchain.ts`):\n",
    "- **Model:** a `BaseChatModel` subclass replaying the same script: 10 calls that each ask for one call of " +
    "`tool_0` with the same arguments, then the answer \"It is sunny.\"; a fresh `AIMessage` per call, with usage. " +
    "`bindTools` binds the tools as call options without converting them to JSON Schema, as our fakes get the " +
    "toolkit without converting it. Streaming (`_streamResponseChunks`) sends the tool call as one chunk and the " +
    "answer as the same two text deltas as ours. No network; the bench refuses to run with LangSmith tracing on.",
    "- **Tools:** `tool_i` made with `tool()` and a zod schema `{ query: z.string(), limit: z.number() }`, with our " +
    "descriptions, answering `\"ok\"`.",
    "- **Middleware:** `createMiddleware` with all six hooks as pass-throughs, like the bench's `passThrough`: " +
    "`beforeAgent`, `beforeModel`, `afterModel` and `afterAgent` return nothing; `wrapModelCall` and " +
    "`wrapToolCall` call the handler. LangGraph runs each `beforeModel` / `afterModel` hook as a graph node.",
    "- **State:** LangGraph's in-memory checkpointer (`MemorySaver`, from `@langchain/langgraph`), as ours " +
    "checkpoints to memory; a fresh thread each run, deleted (`deleteThread`) afterwards. `recursionLimit` is " +
    "raised to 10,000, since 10 middleware take 22 graph steps per agent step.",
    "- **generate** = `agent.invoke`; **stream** = `agent.stream(input, { streamMode: [\"updates\", \"messages\"] })` " +
    "drained: node updates plus the model's chunks, the nearest to our event stream.",
    "- **Checks:** each configuration runs once untimed and must make 11 model calls, leave 10 tool results and the " +
    "answer in the thread, and (stream) deliver the answer in 2 streamed chunks.",
    `- **Sampling:** the same sampler and figure (median CPU per step, user + system), after a warm-up of ` +
    `LangChain's code; each configuration warmed up at least ${s.warmupMs} ms, then the LangChain ` +
    `configurations are timed round-robin among themselves in up to **${s.samples} batches** of at least ` +
    `${s.minSampleMs} ms (ours: up to ${results.sampling.samples}), since a LangChain run lasts tens to ` +
    "hundreds of ms. Our figures are those of the table above, timed a few seconds earlier in the same process.",
    "- **Ours** is the `LanguageModel.make` fake on the installed @effect/ai (what an app on @effect/ai pays: " +
    "@effect/ai decodes each reply), and the raw fake where measured (no @effect/ai work on the model call, like " +
    "LangChain's fake, which hands over a built `AIMessage`).",
    ""
  ]
  const rows: Array<Array<string>> = []
  const encodedRatios: Array<number> = []
  for (const mode of modes) {
    for (const middleware of [0, 10]) {
      for (const tools of sizes) {
        const o = ours(mode, middleware, tools)?.cpuUs
        const r = raw(mode, middleware, tools)?.cpuUs
        const t = theirs(mode, middleware, tools)?.cpuUs
        if (o !== undefined && t !== undefined) encodedRatios.push(t / o)
        rows.push([
          `${mode} · ${middleware} mw · ${tools} tool${tools === 1 ? "" : "s"}`,
          us(o ?? NaN),
          us(r ?? NaN),
          us(t ?? NaN),
          `**${ratio(t, o)}**`,
          ratio(t, r)
        ])
      }
    }
  }
  if (encodedRatios.length > 0) {
    const target = (mode: Mode) => ratio(theirs(mode, 10, 20)?.cpuUs, ours(mode, 10, 20)?.cpuUs)
    out.push(
      `Over these ${encodedRatios.length} configurations LangChain's step costs ` +
        `**${Math.min(...encodedRatios).toFixed(1)}–${Math.max(...encodedRatios).toFixed(0)}×** ours ` +
        `(encoded fake, installed @effect/ai); with 10 middleware and 20 tools, ${target("generate")} in generate ` +
        `mode and ${target("stream")} in stream mode.\n`
    )
  }
  out.push(table([
    "mode · middleware · tools",
    "ours: encoded (installed)",
    "ours: raw",
    "LangChain",
    "LangChain ÷ ours (encoded)",
    "LangChain ÷ ours (raw)"
  ], rows))
  out.push("")
  out.push("By middleware count (1 tool, 10-step runs; ours from section 1):\n")
  const counts = [0, 1, 5, 10]
  const mwRows: Array<Array<string>> = []
  for (const mode of modes) {
    const theirCells = counts.map((middleware) => theirs(mode, middleware, 1)?.cpuUs ?? NaN)
    const ourCells = counts.map((middleware) =>
      find(results.middleware.encoded, { mode, steps: 10, middleware })?.result.cpuUs ?? NaN
    )
    mwRows.push([`LangChain · ${mode}`, ...theirCells.map(us), us(linearFit(counts, theirCells).slope)])
    mwRows.push([`ours (encoded) · ${mode}`, ...ourCells.map(us), us(linearFit(counts, ourCells).slope)])
    mwRows.push([`LangChain ÷ ours · ${mode}`, ...counts.map((_, i) => `**${ratio(theirCells[i], ourCells[i])}**`), ""])
  }
  out.push(table(["", "0 mw", "1 mw", "5 mw", "10 mw", "+ per middleware"], mwRows))
  out.push("")
  const wallRows: Array<Array<string>> = []
  for (const mode of modes) {
    for (const middleware of [0, 10]) {
      for (const tools of sizes) {
        const o = ours(mode, middleware, tools)
        const t = theirs(mode, middleware, tools)
        wallRows.push([
          `${mode} · ${middleware} mw · ${tools} tool${tools === 1 ? "" : "s"}`,
          o === undefined ? "—" : `${us(o.wallUs)} (${us(o.minUs)})`,
          t === undefined ? "—" : `${us(t.wallUs)} (${us(t.minUs)})`,
          ratio(t?.wallUs, o?.wallUs)
        ])
      }
    }
  }
  out.push("<details><summary>Wall clock per step: median (best batch)</summary>\n")
  out.push(table(["mode · middleware · tools", "ours: encoded (installed)", "LangChain", "LangChain ÷ ours"], wallRows))
  out.push("\n</details>")
  return out.join("\n")
}

const microSection = (results: Results): string =>
  table(
    ["piece", "CPU per call", "where the loop pays it"],
    results.micro.map((m) => [m.name, us(m.result.cpuUs), m.note])
  )

/** A ratio as a signed change: 1.04 → "+4%", 0.97 → "−3%". */
const percent = (ratio: number): string => `${ratio <= 1 ? "−" : "+"}${(100 * Math.abs(ratio - 1)).toFixed(0)}%`

const ablationSection = (results: Results): string => {
  if (results.ablation.length === 0) return "_Not run (`--no-ablation`)._"
  const base = results.ablation[0]!
  const keys = ["generate:0", "generate:10", "stream:0", "stream:10", "durable:0", "durable:10"]
  const cell = (a: AblationResult, key: string) => {
    const value = a.perStep[key]
    const relative = a.relative[key]
    if (!a.applicable || value === undefined) return "n/a"
    if (a === base || relative === undefined) return us(value)
    const range = a.relativeRange[key]
    const spread = range === undefined || range[0] === range[1]
      ? ""
      : `; sets ${percent(range[0])} … ${percent(range[1])}`
    return `${us(value)} (${percent(relative)}${spread})`
  }
  return table(
    [
      "variant",
      "change",
      "generate · 0 mw",
      "generate · 10 mw",
      "stream · 0 mw",
      "stream · 10 mw",
      "durable (memory engine) · 0 mw",
      "durable · 10 mw"
    ],
    results.ablation.map((a) => [a.variant.name, a.variant.description, ...keys.map((key) => cell(a, key))])
  )
}

const memorySection = (results: Results): string => {
  const m = results.memory
  const per = (b: number) => `${(b / m.messages).toFixed(0)} B`
  return [
    `A thread of **${m.messages.toLocaleString("en")} messages**, built by constructing \`Prompt\` messages of the ` +
    "shapes an agent run produces (the user message, then assistant tool call + tool result pairs, then the " +
    "answer) and stored as the thread's checkpoint, read back from JSON as a durable store returns it. The agent " +
    "(raw fake, 1 tool, no middleware) then runs on that thread. Heap figures are `heapUsed` deltas after two " +
    "forced collections.\n",
    table(["what", "heap", "per message"], [
      ["the messages as `Prompt.Message` values", bytes(m.decodedBytes), per(m.decodedBytes)],
      [
        "+ their encoded form (`AgentState.encodeMessages`: what a checkpoint holds, cached per message)",
        bytes(m.encodedBytes),
        per(m.encodedBytes)
      ],
      [
        "held after one run on the thread, beyond the stored checkpoint (the result's decoded thread, the new " +
        "checkpoint's array, the loop's encode cache)",
        bytes(m.heldBytes),
        per(m.heldBytes)
      ],
      ["the checkpoint as JSON text (bytes, not heap)", bytes(m.checkpointJsonBytes), per(m.checkpointJsonBytes)]
    ]),
    "",
    table(["CPU time on the 10,000-message thread", "CPU"], [
      ["a run that only answers (load + decode the thread, one model call, save)", us(m.answerRun.cpuUs)],
      ["a run of 100 tool steps, then the answer", us(m.longRun.cpuUs)],
      ["so one more step on this thread costs", us(m.stepUs)]
    ]),
    "",
    "One more step (a model call, a tool call, a checkpoint) on threads of each size, on each checkpointer: the " +
    "same two runs on the stored thread (saved afresh before each run), timed round-robin across the sizes; the " +
    "step is their difference ÷ the tool steps. The file-system checkpointers write in a temporary directory. " +
    "Alone: `npx tsx --conditions=@stepwise-agent/source packages/bench/src/stepsOnly.ts`.\n",
    table(
      [
        "checkpointer",
        ...(results.steps[0]?.sizes ?? []).map((s) => `${s.messages.toLocaleString("en")} messages: CPU (wall)`),
        "largest ÷ smallest (CPU)"
      ],
      results.steps.map((r) => [
        r.backend,
        ...r.sizes.map((s) => `${us(s.stepUs)} (${us(s.stepWallUs)})`),
        `${r.ratio.toFixed(2)}×`
      ])
    ),
    "",
    "The checkpointer alone: one save adding one message to the thread it saved last (CPU). These threads are " +
    "not made by a run's encoder, which records what each one extends, so the file-system and KeyValueStore " +
    "checkpointers compare each with the last one message by message: an O(n) scan a run's step does not pay.\n",
    table(
      [
        "checkpointer",
        ...(results.steps[0]?.sizes ?? []).map((s) => `${s.messages.toLocaleString("en")} messages`),
        "largest ÷ smallest"
      ],
      results.steps.map((r) => [r.backend, ...r.sizes.map((s) => us(s.saveUs)), `${r.saveRatio.toFixed(2)}×`])
    ),
    ...flatThreadTables(results)
  ].join("\n")
}

/** The flat-thread rows: one more step per message size and start, and the first load from a KeyValueStore. */
const flatThreadTables = (results: Results): Array<string> => {
  const flat = results.flatSteps ?? []
  const loads = results.firstLoad ?? []
  if (flat.length === 0 && loads.length === 0) return []
  return [
    "",
    "Flat threads: the same step with `tiny` messages (~150 bytes of JSON) and `realistic` ones (~2 KiB), each " +
    "run starting on a `stored` thread (saved afresh before each run) or continuing the thread the last run " +
    "`grown` (runs timed one by one, round-robin; the thread reset, untimed, once it has grown by 200 messages). " +
    "Alone: `stepsOnly.ts --backend=… --size=tiny --size=realistic --start=stored --start=grown`.\n",
    table(
      [
        "checkpointer",
        "messages",
        "start",
        ...(flat[0]?.sizes ?? []).map((s) => `${s.messages.toLocaleString("en")} messages: CPU (wall)`),
        "largest ÷ smallest (CPU)"
      ],
      flat.map((r) => [
        r.backend,
        r.messageSize,
        r.start,
        ...r.sizes.map((s) => `${us(s.stepUs)} (${us(s.stepWallUs)})`),
        `${r.ratio.toFixed(2)}×`
      ])
    ),
    "",
    "The first load of a thread from a KeyValueStore (in memory) by a checkpointer that has not seen it (another " +
    "instance saved it): read the head and the chunks, parse them, decode the messages; then the same with the " +
    "first save of the thread with one more message, as the first step of a run on a stored thread in a new " +
    "process (CPU). Alone: `npx tsx --conditions=@stepwise-agent/source packages/bench/src/firstLoad.ts`.\n",
    table(
      ["messages", "thread", "JSON", "first load", "first load and first save"],
      loads.map((r) => [
        r.messageSize,
        `${r.messages.toLocaleString("en")} messages`,
        bytes(r.jsonBytes),
        us(r.loadUs),
        us(r.loadAndSaveUs)
      ])
    )
  ]
}

const profileSection = (results: Results): string => {
  if (results.profiles.length === 0) return "_Not run (`--no-profile`)._"
  const out: Array<string> = []
  for (const p of results.profiles) {
    const s = p.summary
    out.push(
      `### ${modelTitle(p.model)}${
        p.build !== undefined
          ? ` on the **${p.build}** build`
          : p.model === "encoded"
          ? ` on the installed (${results.effectAi.installed}) build`
          : ""
      } — generate, ` +
        "10 pass-through middleware, 20 tools, 10-step runs\n\n" +
        `${p.runs} runs (${p.steps} steps) in ${p.seconds} s after a 1.5 s warm-up; ${
          s.samples.toLocaleString("en")
        } ` +
        `samples at 100 µs, ${s.totalMs.toFixed(0)} ms sampled (idle excluded), ` +
        `≈ ${us((s.totalMs * 1000) / p.steps)} per step under the profiler.\n`
    )
    out.push(table(
      ["area (self time)", "ms", "%"],
      s.areas.map((a) => [a.name, a.ms.toFixed(0), a.percent.toFixed(1)])
    ))
    out.push("")
    out.push(table(
      ["inclusive (time with the function on the stack)", "ms", "%"],
      s.inclusive.map((r) => [r.name, r.ms.toFixed(0), r.percent.toFixed(1)])
    ))
    out.push("")
    out.push(
      "<details><summary>Top self-time functions</summary>\n\n" +
        table(
          ["function", "where", "self ms", "%"],
          s.self.map((r) => [`\`${r.name.replace(/\|/g, "\\|")}\``, r.location, r.ms.toFixed(0), r.percent.toFixed(1)])
        ) +
        "\n\n</details>\n"
    )
  }
  return out.join("\n")
}

const ms = (value: number): string => (value >= 100 ? value.toFixed(0) : value.toFixed(1))

const medianOf = (values: ReadonlyArray<number>): number => {
  const sorted = [...values].sort((a, b) => a - b)
  const mid = sorted.length >> 1
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2
}

/** `part` as a percentage of `whole`, e.g. `85%`. */
const percentOf = (part: number, whole: number): string => `${((100 * part) / whole).toFixed(0)}%`

/** How much lower `after` is than `before`, e.g. `65%`. */
const percentOff = (before: number, after: number): string => percentOf(before - after, before)

const engineNames = {
  memory: "`AgentEngine.layerMemory`",
  sqlite: "`AgentEngine.layerSqlite`",
  postgres: "`AgentEngine.layerPostgres`"
} as const

/**
 * Section 6 (durable mode) as Markdown, alone: what `--only-durable` prints.
 *
 * @since 0.1.0
 * @category rendering
 */
export const durableSection = (d: DurableResult): string => {
  const row = (key: DurableResult["perStep"][number]["key"]) => d.perStep.find((r) => r.key === key)!.result
  const base = row("inProcess")
  const sql = row("inProcessSql")
  const memory = row("memory")
  const sqlite = row("sqlite")
  const pg = d.perStep.find((r) => r.key === "postgres")?.result
  const activity = (engine: DurableResult["activities"][number]["engine"]) => {
    const a = d.activities.find((r) => r.engine === engine)!
    const per = (sample: Sample, field: "cpuUs" | "wallUs") => (sample[field] - a.empty[field]) / d.activityCount
    return {
      empty: a.empty,
      cpu: per(a.full, "cpuUs"),
      wall: per(a.full, "wallUs"),
      reusedCpu: per(a.reused, "cpuUs"),
      reusedWall: per(a.reused, "wallUs")
    }
  }
  const mem = activity("memory")
  const lite = activity("sqlite")
  // a run journals its `run` request plus one request per activity
  const perStepActivities = (d.journal.messages - 1) / d.steps
  const times = (value: number) => `${(value / base.cpuUs).toFixed(value / base.cpuUs >= 10 ? 0 : 1)}×`
  const out: Array<string> = [
    `The workload of sections 1 and 2 — the \`LanguageModel.make\` fake, one tool, no middleware, generate, ` +
    `${d.steps}-step runs — with a fake that decides from the prompt rather than from a counter (while the prompt ` +
    `holds fewer than ${d.steps} tool results it asks for \`tool_0\` with id \`call_<n+1>\`), so that a run ` +
    "replayed in a fresh process continues where it stopped (`packages/bench/src/durable.ts`). A durable run is " +
    "`AgentWorkflow.start` followed by the workflow's `execute` on the same run, which waits for the result " +
    "without polling; every run uses a fresh thread, deleted afterwards. The SQLite database is a temporary file " +
    `(${d.filesystem}, WAL, \`synchronous = ${d.synchronous}\`), shared by \`AgentEngine.layerSqlite\`, ` +
    "`SqlCheckpointer` and `RunStore.layer` as an app would. " +
    (d.postgresMissing === undefined
      ? "The PostgreSQL database is on a throwaway server on this machine (the workflow tests' one: `initdb` in a " +
        "temporary folder, reached over TCP on 127.0.0.1, `fsync = off`, so that, like SQLite here, no commit " +
        "waits for the disk), shared the same way, with one runner. "
      : `There is no PostgreSQL row: no server could be started (${d.postgresMissing}). `) +
    (d.clusterBuild === "patched"
      ? "@effect/cluster 0.60.2 carries the repository's patch (`packages/workflow/assets/patches`: on SQLite a request " +
        "is written, and the unprocessed messages read, with one statement each). "
      : "@effect/cluster 0.60.2 ran as published, without the repository's patch. ") +
    `The ${d.perStep.length} ways are timed round-robin with the ` +
    `sampler of section 1 (warm-up ${d.sampling.warmupMs} ms, up to ${d.sampling.samples} batches of at least ` +
    `${d.sampling.minSampleMs} ms); this section took ${d.seconds.toFixed(0)} s.\n`,
    table(["how the run is executed", "CPU / step", "wall / step", "CPU over in-process", "CPU × in-process"], [
      ...d.perStep.map((r) => [
        r.label,
        us(r.result.cpuUs),
        `${us(r.result.wallUs)} (${us(r.result.minUs)})`,
        r.key === "inProcess" ? "—" : `+${us(r.result.cpuUs - base.cpuUs)}`,
        r.key === "inProcess" ? "1×" : times(r.result.cpuUs)
      ])
    ]),
    "",
    "Wall clock: median (best batch).",
    "",
    `**What a run journals.** One durable run on SQLite adds ${d.journal.messages} requests and ` +
    `${d.journal.replies} replies to @effect/cluster's tables (${bytes(d.journal.payloadBytes)} of JSON payloads): ` +
    `the \`run\` request, then one per activity — \`load\`, \`model/<n>\` for each of the ${d.steps + 1} model ` +
    `calls, \`tool/<id>\` for each of the ${d.steps} tool calls, and \`checkpoint/<n>\` for the last save only: ` +
    "a checkpoint is written inside the activity that follows it, and is an activity of its own only before a " +
    `wait and at the end of a run — so ${perStepActivities.toFixed(1)} activities per step. Nothing prunes them: ` +
    "the journal grows with every run.",
    "",
    "**What SQLite is asked to do** (counted in the process, not timed, so the machine's load does not move it: " +
    "better-sqlite3's statements executed and compiled, and the transactions begun; the least of 3 tries — a bare " +
    `run of ${d.activityCount} activities less one of none, and one agent run over its ${d.steps} steps; ` +
    `@effect/cluster ${d.clusterBuild}):\n`,
    table(["", "statements", "of them compiled anew (`prepare`)", "explicit transactions"], [
      [
        "one activity round trip",
        d.sqliteWork.perActivity.statements.toFixed(2),
        d.sqliteWork.perActivity.prepares.toFixed(2),
        d.sqliteWork.perActivity.transactions.toFixed(2)
      ],
      [
        "one agent step (its activities, checkpoint, cancel check)",
        d.sqliteWork.perStep.statements.toFixed(1),
        d.sqliteWork.perStep.prepares.toFixed(1),
        d.sqliteWork.perStep.transactions.toFixed(1)
      ]
    ]),
    "",
    `On the memory engine a durable step runs ${d.memoryFiberOps.toFixed(1)} fiber operations (counted: every step ` +
    "of the run loop of the run's fibers, `fiberOps.ts`).",
    "",
    `**One activity round trip.** A bare workflow runs ${d.activityCount} activities that return a number, or ` +
    "none; the difference per activity is the round trip. The last column gives every activity the same exit " +
    "schema: @effect/workflow 0.19 builds a new `Schema.ExitFromSelf` in each `Activity.make`, and the engine " +
    "decodes each result with it, so its parser is compiled anew for every activity.\n",
    table(
      [
        "engine",
        "a run with no activity (wall)",
        "per activity: CPU",
        "per activity: wall",
        "one shared exit schema: CPU",
        "one shared exit schema: wall"
      ],
      d.activities.map((row) => [row.engine, activity(row.engine)] as const).map(([engine, a]) => [
        engineNames[engine],
        us(a.empty.wallUs),
        us(a.cpu),
        us(a.wall),
        us(a.reusedCpu),
        us(a.reusedWall)
      ])
    ),
    "",
    `**Where a durable step goes** (per step; the activity line is ${perStepActivities.toFixed(1)} × the round ` +
    "trip with a shared exit schema above; the remainder is a difference of separately timed figures, so it " +
    "carries their noise):\n",
    table(["", "memory: CPU", "memory: wall", "SQLite: CPU", "SQLite: wall"], [
      ["the in-process loop", us(base.cpuUs), us(base.wallUs), us(base.cpuUs), us(base.wallUs)],
      [
        "+ checkpoints in SQL (`SqlCheckpointer`: the difference of the two in-process rows)",
        "—",
        "—",
        us(sql.cpuUs - base.cpuUs),
        us(sql.wallUs - base.wallUs)
      ],
      [
        `+ ${
          perStepActivities.toFixed(1)
        } activity round trips (one shared exit schema per kind, as \`AgentWorkflow\` does)`,
        us(perStepActivities * mem.reusedCpu),
        us(perStepActivities * mem.reusedWall),
        us(perStepActivities * lite.reusedCpu),
        us(perStepActivities * lite.reusedWall)
      ],
      [
        "+ the remainder: the journaled values' larger schemas (model replies, tool results), the context copied " +
        "into each activity, `RunStore`",
        us(memory.cpuUs - base.cpuUs - perStepActivities * mem.reusedCpu),
        us(memory.wallUs - base.wallUs - perStepActivities * mem.reusedWall),
        us(sqlite.cpuUs - sql.cpuUs - perStepActivities * lite.reusedCpu),
        us(sqlite.wallUs - sql.wallUs - perStepActivities * lite.reusedWall)
      ],
      ["= the measured durable step", us(memory.cpuUs), us(memory.wallUs), us(sqlite.cpuUs), us(sqlite.wallUs)]
    ]),
    ""
  ]
  if (d.resume.length > 0) {
    const r = d.resume
    const med = (f: (s: DurableResult["resume"][number]) => number) => medianOf(r.map(f))
    out.push(
      `**Resuming after a crash** (SQLite, ${r.length} samples; wall clock, ms). A child process ` +
        "(`durableChild.ts`, started like the bench: node with tsx's loader) starts a run on a fresh SQLite file " +
        "and is SIGKILLed inside its first tool call, before that call's result is journaled. A fresh child on " +
        "the same file builds the same layers and does nothing else: the runner takes the shards and picks the " +
        "run up by itself; the child polls the run every 5 ms and reports when node had booted, its script " +
        "started (tsx and the modules loaded), its layers were up, it made its first call of its own, and the " +
        "run was complete. Timestamps cross processes through `performance.timeOrigin`.\n"
    )
    out.push(table(
      [
        "sample",
        "first process: spawn → killed at its first tool call",
        "spawn → node booted",
        "→ tsx and modules loaded",
        "→ layers up",
        "→ first call of its own (redelivery, replay)",
        "→ run complete",
        "spawn → complete"
      ],
      [
        ...r.map((s, i) => [
          `${i + 1}`,
          ms(s.crashedAfterMs),
          ms(s.bootMs),
          ms(s.loadMs),
          ms(s.layersMs),
          ms(s.replayMs),
          ms(s.restMs),
          `**${ms(s.totalMs)}**`
        ]),
        [
          "median",
          ms(med((s) => s.crashedAfterMs)),
          ms(med((s) => s.bootMs)),
          ms(med((s) => s.loadMs)),
          ms(med((s) => s.layersMs)),
          ms(med((s) => s.replayMs)),
          ms(med((s) => s.restMs)),
          `**${ms(med((s) => s.totalMs))}**`
        ]
      ]
    ))
    out.push("")
    const calls = r[0]!
    const fromJournal = d.steps + 1 - calls.modelCalls
    const rerun = calls.toolCalls - (d.steps - 1)
    out.push(
      `The resumed process made ${calls.modelCalls} model calls and ${calls.toolCalls} tool calls: ` +
        `${fromJournal} model call${fromJournal === 1 ? "" : "s"} came from the journal, and ` +
        (rerun === 1
          ? "the tool call cut off by the kill ran again (activities are at-least-once)."
          : `the tool call cut off by the kill ran ${rerun} times.`)
    )
    out.push("")
    const start = med((s) => s.bootMs + s.loadMs)
    const total = med((s) => s.totalMs)
    out.push("**Reading.**\n")
    out.push(
      [
        `- On the memory engine a durable step costs ${times(memory.cpuUs)} the in-process step in CPU ` +
        `(+${us(memory.cpuUs - base.cpuUs)}), and ${perStepActivities.toFixed(1)} activity round trips ` +
        `account for ${us(perStepActivities * mem.reusedCpu)} of that. Sharing one exit schema takes ` +
        `${percentOff(mem.cpu, mem.reusedCpu)} off a bare round trip (${us(mem.cpu)} → ${us(mem.reusedCpu)} of ` +
        "CPU); `AgentWorkflow` gives each kind of activity one shared exit schema, so its round trips cost " +
        "about the shared figure, while a workflow of your own with plain `Activity.make` pays the first. " +
        "The remainder is the agent's own activity plumbing.",
        `- On SQLite a step costs ${times(sqlite.cpuUs)} the in-process step in CPU (${us(sqlite.wallUs)} of wall ` +
        `clock). ${percentOf(perStepActivities * lite.reusedCpu, sqlite.cpuUs - base.cpuUs)} of the added CPU is ` +
        `the ${perStepActivities.toFixed(1)} activity round trips (${
          us(lite.reusedCpu)
        } each), every one a request and a ` +
        "reply persisted through @effect/cluster's message storage, with its RPC encoding on both sides; " +
        `sharing the exit schema ${
          lite.reusedCpu <= 0.9 * lite.cpu ? `takes ${percentOff(lite.cpu, lite.reusedCpu)} off` : "changes little"
        } there (${us(lite.cpu)} → ${us(lite.reusedCpu)} of CPU per activity). The SQL checkpoints alone add ` +
        `${us(sql.cpuUs - base.cpuUs)} per step. Against a real model call (hundreds of milliseconds to seconds) ` +
        "this is still small.",
        ...(pg === undefined ? [] : [
          `- On PostgreSQL (one runner, the server on the same machine) a step costs ${times(pg.cpuUs)} the ` +
          `in-process step in CPU in this process and ${us(pg.wallUs)} of wall clock, which includes the ` +
          `server's work; an activity round trip takes ${us(activity("postgres").reusedWall)} of wall clock ` +
          `against ${us(lite.reusedWall)} on SQLite.`
        ]),
        `- Resuming takes ${ms(total)} ms from spawn to a completed run; ${ms(start)} ms of it (` +
        `${((100 * start) / total).toFixed(0)}%) is starting node and loading the modules through tsx, ` +
        `${ms(med((s) => s.layersMs))} ms building the layers, and only ${ms(med((s) => s.replayMs))} ms passes ` +
        "before the run does new work — the runner redelivers the unfinished run as soon as it holds its shards, " +
        `without waiting for the storage poll. The rest (${ms(med((s) => s.restMs))} ms) is the remaining steps ` +
        "on a cold JIT."
      ].join("\n")
    )
  }
  return out.join("\n")
}

/**
 * Renders the generated part of `docs/benchmarks.md`.
 *
 * @since 0.1.0
 * @category constructors
 */
export const render = (results: Results): string => {
  const m = results.machine
  const s = results.sampling
  return [
    "## Machine and method",
    "",
    `- **Date:** ${m.date}`,
    `- **CPU:** ${m.cpu} · \`nproc\` = ${m.cores} · ${m.memoryGiB.toFixed(1)} GiB RAM`,
    `- **Node:** ${m.node} · effect ${m.versions["effect"]} · @effect/ai ${m.versions["@effect/ai"]} · ` +
    `tsx ${m.versions["tsx"]} (the harness only: the packages are timed as their built JavaScript, \`dist/\` of ` +
    "`tsc -b`, as an app installing them from npm runs them)",
    `- **LangChain (for the ratio):** langchain ${m.versions["langchain"]} · @langchain/core ` +
    `${m.versions["@langchain/core"]} · @langchain/langgraph ${m.versions["@langchain/langgraph"]} · zod ` +
    `${m.versions["zod"]}` + (results.langchain === undefined ? " (not run: `--no-langchain`)" : ""),
    `- **Vercel AI SDK (for the ratio):** ai ${m.versions["ai7"]} (the bench's \`ai7\` alias)` +
    (results.peers === undefined ? " (not run: `--no-aisdk`)" : ""),
    `- **@effect/ai build:** the installed copy is **${results.effectAi.installed}**` +
    (results.effectAi.patchFile === undefined ? "" : ` (patch: \`${results.effectAi.patchFile}\`)`) +
    (results.effectAi.other === undefined
      ? `; no other build measured (${results.effectAi.note ?? "none"}).`
      : `; rows marked **${results.effectAi.other}** run a copy of it with the patch ` +
        `${results.effectAi.other === "patched" ? "applied" : "reversed"}, loaded from a temporary directory.`),
    `- **Load average (1/5/15 min):** ${m.loadStart.map((l) => l.toFixed(2)).join(" / ")} at start, ` +
    `${m.loadEnd.map((l) => l.toFixed(2)).join(" / ")} at end; the whole bench took ${m.elapsedSeconds.toFixed(0)} s` +
    (results.quick ? " (**--quick**: short sampling, numbers are rough)" : ""),
    `- **Sampling:** each configuration is warmed up (at least ${s.warmupMs} ms and one run), then timed in up to ` +
    `${s.samples} batches of at least ${s.minSampleMs} ms of whole runs (at least 3 batches when runs are slow); ` +
    "the figure is the **median CPU time (user + system, `process.cpuUsage`) per step** over the batches. The " +
    "configurations of one table are timed round-robin (one batch of each per round), so a change in the " +
    "machine's load hits them alike. Wall clock is in the collapsed table.",
    "- **A run of N steps** is N model calls that each call one tool (the tool answers `\"ok\"`) plus the final " +
    "answer: N + 1 model calls, N tool calls, a checkpoint after each tool step and at the end (memory " +
    "checkpointer), a fresh thread each run. Figures are per step = run time ÷ N, so they include the run's " +
    "fixed costs (thread load, final answer, `beforeAgent`/`afterAgent`), amortised.",
    "- **Middleware:** a pass-through middleware (`passThrough` of the bench fixtures) implements all six hooks; a step calls four of them " +
    "(`beforeModel`, `wrapModelCall`, `afterModel`, `wrapToolCall`), so \"+ per hook call\" = \"+ per middleware\" ÷ 4.",
    "- **Tools:** `tool_i` with `{ query: string, limit: number }` parameters, a description and a string result; " +
    "the model always calls `tool_0`.",
    "",
    "## 1. Cost per step and per middleware (1 tool)",
    "",
    middlewareSection(results),
    "",
    "## 2. Cost per step by toolkit size (10-step runs)",
    "",
    toolsSection(results),
    "",
    "### Against LangChain JS `createAgent` (same workload, same run)",
    "",
    langchainSection(results),
    "",
    "### Against the Vercel AI SDK 7 `ToolLoopAgent`, and the floor (same workload, interleaved)",
    "",
    results.peers === undefined ? "_Not run (`--no-aisdk`)._" : Peers.render(results.peers),
    "",
    "### The pieces of a step",
    "",
    "Each measured alone, in a loop, on the same runtime (no tracer installed, so spans are Effect's " +
    "default in-memory `NativeSpan`s):",
    "",
    microSection(results),
    "",
    "### The loop without one cost at a time",
    "",
    "Raw fake, 1 tool, 10-step runs, CPU per step. `packages/core/src` (with `packages/workflow/src` beside it, " +
    "for durable runs on the memory engine) is copied to a temporary directory and patched (one small change " +
    "per variant; the repository is not touched), given an option or taken at an older commit, transpiled to " +
    "JavaScript and run on plain node with a young generation of fixed size, each copy in a process of its own, " +
    `in ${processSets(results.quick)} fresh set(s) of processes, timed in interleaved batches after 2 s of ` +
    "CPU warm-up. The figure is the median over the sets of the **fastest** batch (other processes only ever add " +
    "time); the percentage is the median over all rounds of the variant's batch ÷ the first row's batch of the " +
    "same round, and \"sets\" the lowest and highest of the sets' medians. \"as is, again\" is a second copy of " +
    "the same loop: what it reads against the first row is what the method cannot tell apart. `n/a`: the patch " +
    "no longer matches the loop's code.",
    "",
    ablationSection(results),
    "",
    "## 3. Memory of a 10,000-message thread",
    "",
    memorySection(results),
    "",
    "## 4. CPU profiles",
    "",
    profileSection(results),
    ...(results.context === undefined
      ? []
      : ["", "## 5. Context editing, summarization and token counting", "", Context.render(results.context)]),
    ...(results.durable === undefined
      ? []
      : [
        "",
        "## 6. Durable mode: `AgentWorkflow` on the memory, SQLite and PostgreSQL engines",
        "",
        durableSection(results.durable)
      ]),
    ...(results.pii === undefined
      ? []
      : ["", "## 7. Streamed PII redaction", "", PiiBench.render(results.pii)]),
    ...(results.scale === undefined
      ? []
      : ["", "## 8. Scale in one process: idle threads and concurrent runs", "", Scale.render(results.scale)]),
    ...(results.steering === undefined
      ? []
      : ["", "## 9. Steering: what a message sent to a running run adds", "", Steering.render(results.steering)]),
    ...(results.replay === undefined
      ? []
      : [
        "",
        "## 10. Replay, run records and forks",
        "",
        Replay.render(results.replay.replay, results.replay.fork)
      ])
  ].join("\n")
}

const BEGIN = "<!-- bench:begin — generated by packages/bench/src/run.ts (npm run bench); edit outside the markers -->"
const END = "<!-- bench:end -->"

/**
 * Writes `generated` between the markers of `file` (creating the file with a
 * short frame if it does not exist).
 *
 * @since 0.1.0
 * @category constructors
 */
export const writeInto = (file: string, generated: string): void => {
  const block = `${BEGIN}\n\n${generated}\n\n${END}`
  let text: string
  if (fs.existsSync(file)) {
    const current = fs.readFileSync(file, "utf8")
    const start = current.indexOf("<!-- bench:begin")
    const end = current.indexOf(END)
    text = start >= 0 && end > start
      ? current.slice(0, start) + block + current.slice(end + END.length)
      : `${current.trimEnd()}\n\n${block}\n`
  } else {
    fs.mkdirSync(path.dirname(file), { recursive: true })
    text = `# Benchmarks\n\nRun \`npm run bench\` to refresh the numbers below.\n\n${block}\n`
  }
  fs.writeFileSync(file, text)
}
