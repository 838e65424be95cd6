/**
 * Our step beside the Vercel AI SDK 7's `ToolLoopAgent` (`aiSdk.ts`) and the
 * floor (`floor.ts`, the cheapest Effect program doing a step's work), all
 * timed round-robin in one `sampleMany`, so each ratio is of figures from the
 * same rounds. Part of `npm run bench` (skip with `--no-aisdk`), or alone:
 * `npx tsc -b packages/bench/tsconfig.json && npx tsx packages/bench/src/peers.ts [--quick]` (prints the
 * Markdown).
 *
 * Every workload is a 10-step run with one tool (10 model calls that each ask
 * for one tool call, then the answer); figures are per step. Our loop on the
 * encoded and the raw fake, generate and stream, 0 and 10 pass-through
 * middleware; the AI SDK with 0 and 10 pass-through `wrapLanguageModel`
 * middleware; the floor on both fakes, generate and stream. Each workload is
 * checked once (11 model calls, 10 tool results, the answer) before it is
 * timed. Then the bytes each allocates per step (`allocated`: the growth of
 * `heapUsed` over runs with no garbage collection; `—` when no such window
 * was found, e.g. with a young generation too small to hold one).
 *
 * @since 0.1.0
 */
import { Effect } from "effect"
import { performance } from "node:perf_hooks"
import { pathToFileURL } from "node:url"
import { makeAiSdkBench } from "./aiSdk.js"
import { answerDeltas, type Mode, type ModelKind } from "./fakes.js"
import { makeBench } from "./fixtures.js"
import { makeFloor } from "./floor.js"
import { allocated, type Sample, sampleMany, type SampleOptions } from "./measure.js"

/**
 * Who runs a workload: our loop on one of the fakes, the AI SDK's
 * `ToolLoopAgent`, or the floor on one of the fakes.
 *
 * @since 0.1.0
 * @category models
 */
export type Side = "ours" | "ai-sdk" | "floor"

/**
 * One timed workload.
 *
 * @since 0.1.0
 * @category models
 */
export interface PeerRow {
  readonly side: Side
  /** The fake model (ours and the floor); the AI SDK runs its own mock. */
  readonly model: ModelKind | "mock"
  readonly mode: Mode
  readonly middleware: number
  readonly result: Sample
  /** Bytes allocated per step (`NaN` when not measured). */
  readonly bytes: number
}

/**
 * The section's figures.
 *
 * @since 0.1.0
 * @category models
 */
export interface PeersResult {
  readonly steps: number
  readonly sampling: Omit<SampleOptions, "unitsPerRun">
  readonly rows: ReadonlyArray<PeerRow>
  /** The AI SDK's version (`ai7` in the bench's devDependencies). */
  readonly aiVersion: string
}

const STEPS = 10

interface Workload {
  readonly side: Side
  readonly model: ModelKind | "mock"
  readonly mode: Mode
  readonly middleware: number
  readonly effect: Effect.Effect<void, unknown>
}

const answer = answerDeltas.join("")

const fail = (what: string, checked: unknown): never => {
  throw new Error(`${what} did not run as scripted: ${JSON.stringify(checked)}`)
}

const build = async (): Promise<Array<Workload>> => {
  const out: Array<Workload> = []
  for (const mode of ["generate", "stream"] as const) {
    for (const middleware of [0, 10]) {
      for (const model of ["encoded", "raw"] as const) {
        const bench = await Effect.runPromise(makeBench({ model, mode, middleware, tools: 1, steps: STEPS }))
        const checked = await Effect.runPromise(bench.check)
        if (checked.steps !== STEPS + 1 || checked.toolResults !== STEPS || checked.text !== answer) {
          fail(`ours (${model}, ${mode}, ${middleware} mw)`, checked)
        }
        out.push({ side: "ours", model, mode, middleware, effect: bench.runOnce })
      }
      const sdk = makeAiSdkBench({ mode, middleware, tools: 1, steps: STEPS })
      const checked = await Effect.runPromise(sdk.check)
      if (
        checked.steps !== STEPS + 1 || checked.toolResults !== STEPS || checked.text !== answer ||
        (mode === "stream" && (checked.streamedText !== answer || checked.streamedChunks !== answerDeltas.length))
      ) {
        fail(`the AI SDK (${mode}, ${middleware} mw)`, checked)
      }
      out.push({ side: "ai-sdk", model: "mock", mode, middleware, effect: sdk.runOnce })
    }
    for (const model of ["encoded", "raw"] as const) {
      const floor = await Effect.runPromise(makeFloor({ model, mode, steps: STEPS }))
      const thread = await Effect.runPromise(floor.check)
      const last = thread.at(-1)
      const text = last?.role === "assistant" && last.content[0]?.type === "text" ? last.content[0].text : undefined
      if (
        thread.length !== 2 * STEPS + 2 || thread.filter((m) => m.role === "tool").length !== STEPS || text !== answer
      ) {
        fail(`the floor (${model}, ${mode})`, thread)
      }
      out.push({ side: "floor", model, mode, middleware: 0, effect: floor.runOnce })
    }
  }
  return out
}

/**
 * Runs the measurement.
 *
 * @since 0.1.0
 * @category constructors
 */
export const measure = async (
  options: { readonly quick: boolean; readonly aiVersion: string; readonly log: (line: string) => void }
): Promise<PeersResult> => {
  const workloads = await build()
  // the AI SDK's code paths warm up together first, as ours did at the start of the bench
  const until = performance.now() + (options.quick ? 400 : 1500)
  for (let round = 0; performance.now() < until; round++) {
    await Effect.runPromise(workloads[round % workloads.length]!.effect)
  }
  const sampling = options.quick
    ? { warmupMs: 100, minSampleMs: 30, samples: 3, maxSampleMs: 300 }
    : { warmupMs: 300, minSampleMs: 100, samples: 7, maxSampleMs: 1500 }
  const timed = await sampleMany(workloads.map((w) => ({ effect: w.effect, unitsPerRun: STEPS })), sampling)
  const rows: Array<PeerRow> = []
  for (const [i, w] of workloads.entries()) {
    // a window of about 20 steps: small enough for a young generation of the default size
    const bytes = await allocated(w.effect, 2, STEPS)
    const result = timed[i]!
    rows.push({ side: w.side, model: w.model, mode: w.mode, middleware: w.middleware, result, bytes })
    options.log(
      `  ${w.side.padEnd(6)} ${w.model.padEnd(7)} ${w.mode.padEnd(8)} mw=${String(w.middleware).padStart(2)}  ` +
        `${result.cpuUs.toFixed(1).padStart(8)} µs CPU/step  ${(bytes / 1024).toFixed(1).padStart(7)} KiB/step`
    )
  }
  return { steps: STEPS, sampling, rows, aiVersion: options.aiVersion }
}

const us = (value: number | undefined): string =>
  value === undefined || Number.isNaN(value)
    ? "—"
    : value >= 1000
    ? `${(value / 1000).toFixed(2)} ms`
    : value >= 100
    ? `${value.toFixed(0)} µs`
    : `${value.toFixed(1)} µs`

const kib = (value: number | undefined): string =>
  value === undefined || Number.isNaN(value) ? "—" : `${(value / 1024).toFixed(1)} KiB`

const times = (a: number | undefined, b: number | undefined): string =>
  a === undefined || b === undefined || Number.isNaN(a) || Number.isNaN(b) || b === 0
    ? "—"
    : `${(a / b).toFixed(a / b >= 10 ? 0 : 1)}×`

/**
 * Renders the section's Markdown.
 *
 * @since 0.1.0
 * @category constructors
 */
export const render = (result: PeersResult): string => {
  const row = (side: Side, model: PeerRow["model"], mode: Mode, middleware: number) =>
    result.rows.find((r) => r.side === side && r.model === model && r.mode === mode && r.middleware === middleware)
  const s = result.sampling
  const peerRows: Array<Array<string>> = []
  for (const mode of ["generate", "stream"] as const) {
    for (const middleware of [0, 10]) {
      const encoded = row("ours", "encoded", mode, middleware)
      const raw = row("ours", "raw", mode, middleware)
      const sdk = row("ai-sdk", "mock", mode, middleware)
      peerRows.push([
        `${mode} · ${middleware} mw`,
        us(encoded?.result.cpuUs),
        us(raw?.result.cpuUs),
        us(sdk?.result.cpuUs),
        `**${times(sdk?.result.cpuUs, encoded?.result.cpuUs)}**`,
        times(sdk?.result.cpuUs, raw?.result.cpuUs),
        `${kib(encoded?.bytes)} / ${kib(raw?.bytes)} / ${kib(sdk?.bytes)}`
      ])
    }
  }
  const floorRows: Array<Array<string>> = []
  for (const model of ["raw", "encoded"] as const) {
    for (const mode of ["generate", "stream"] as const) {
      const floor = row("floor", model, mode, 0)
      const ours = row("ours", model, mode, 0)
      floorRows.push([
        `${model} fake · ${mode}`,
        us(floor?.result.cpuUs),
        us(ours?.result.cpuUs),
        `**${times(ours?.result.cpuUs, floor?.result.cpuUs)}**`,
        kib(floor?.bytes),
        kib(ours?.bytes),
        times(ours?.bytes, floor?.bytes)
      ])
    }
  }
  const head = (
    cells: ReadonlyArray<string>
  ) => [`| ${cells.join(" | ")} |`, `|${cells.map((_, i) => (i === 0 ? "---" : "---:")).join("|")}|`]
  return [
    `The Vercel AI SDK ${result.aiVersion} \`ToolLoopAgent\` (\`packages/bench/src/aiSdk.ts\`) and the floor ` +
    "(`packages/bench/src/floor.ts`) run the same workload in the same process as ours, **timed round-robin with " +
    "our configurations in one sampler** (each workload warmed up at least " +
    `${s.warmupMs} ms, then up to ${s.samples} rounds of one batch of at least ${s.minSampleMs} ms of each), so ` +
    `each ratio is of figures taken in the same rounds. ${result.steps}-step runs, one tool; CPU per step.`,
    "",
    "- **AI SDK model:** its own `MockLanguageModelV4` (`ai/test`) replaying our script: the tool call (arguments " +
    "JSON-encoded, as a provider sends them) or the answer, with usage; streamed, the whole reply in one " +
    "`ReadableStream` (`convertArrayToReadableStream`), the answer as the same two text deltas as ours. The mock's " +
    "record of calls is emptied before each run.",
    "- **AI SDK tools and middleware:** `tool()` with a zod schema `{ query: string, limit: number }` answering " +
    "`\"ok\"`; `wrapLanguageModel` with pass-through middleware implementing `transformParams`, `wrapGenerate` and " +
    "`wrapStream` (the SDK's middleware wraps model calls only). `stopWhen: isStepCount(11)`. " +
    "generate = `agent.generate`; stream = `agent.stream` with its `fullStream` drained.",
    "- **What differs:** the AI SDK stores no thread (a run's messages live in its result); ours checkpoints the " +
    "thread to memory after every step and runs four hooks per middleware per step (theirs: two per model call).",
    "",
    head([
      "mode · middleware",
      "ours: encoded",
      "ours: raw",
      "AI SDK `ToolLoopAgent`",
      "AI SDK ÷ ours (encoded)",
      "AI SDK ÷ ours (raw)",
      "allocated per step: ours encoded / raw / AI SDK"
    ]).join("\n"),
    ...peerRows.map((r) => `| ${r.join(" | ")} |`),
    "",
    "**The floor:** the cheapest Effect 3 program that does a step's work, no middleware: the model service's " +
    "`generateText` (or its `streamText` drained in the calling fiber) with the thread as the prompt and the " +
    "toolkit, the tool's handler on the call's parameters with its result encoded, the two messages appended to an " +
    "array; no hooks, checkpoint, events or checks. Ours ÷ floor is what our loop costs on top of the work itself.",
    "",
    head(["fake · mode", "floor", "ours (0 mw)", "ours ÷ floor", "floor: allocated per step", "ours", "ours ÷ floor"])
      .join("\n"),
    ...floorRows.map((r) => `| ${r.join(" | ")} |`)
  ].join("\n")
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) {
  const { createRequire } = await import("node:module")
  const aiVersion = (createRequire(import.meta.url)("ai7/package.json") as { version: string }).version
  const result = await measure({ quick: process.argv.includes("--quick"), aiVersion, log: (l) => console.log(l) })
  console.log(render(result))
}
