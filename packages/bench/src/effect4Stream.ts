/**
 * What Effect 4's stream runtime would give a streamed step: the same
 * cheapest step program on @effect/ai 0.37 (Effect 3, what the packages run
 * on) and on `effect/ai` of effect 4.1.5 (installed under the alias
 * `effect4`), generated and streamed, beside our streamed and generated step,
 * all timed round-robin in one process (`sampleMany`), so the gain of a later
 * port is a number. Not part of `npm run bench`; run alone:
 * `npx tsc -b packages/bench/tsconfig.json && npx tsx packages/bench/src/effect4Stream.ts [--quick]`.
 *
 * The step program, the same on both versions: a 10-step run (one tool, the
 * thread a plain array); each step calls the model service built with that
 * version's `LanguageModel.make` (canned encoded parts, as a provider
 * returns them: our encoded fake) with the thread as the prompt and the
 * toolkit, lets the AI module resolve the tool call itself (it runs the
 * handler and returns the result part), and appends the two messages; one
 * more call answers. Streamed, the service's `streamText` is drained in the
 * calling fiber (Effect 3: pulling its channel in a scope of our own, as the
 * loop does; Effect 4: `Stream.runForEachArray`, which pulls in the calling
 * fiber too). The streamed reply is the whole canned reply in one chunk.
 *
 * Also one bare model call on each version, as our loop makes it
 * (`disableToolCallResolution`: the loop runs tools itself), answering with
 * a tool call: what the model call alone costs, generated and streamed.
 *
 * @since 0.1.0
 */
import * as Ai3 from "@effect/ai"
import type { Stream as Stream3 } from "effect"
import { Effect as Effect3 } from "effect"
import * as E4 from "effect4"
import * as Ai4 from "effect4/ai"
import { createRequire } from "node:module"
import * as os from "node:os"
import {
  answerDeltas,
  callParams,
  encodedModel,
  makeToolkit,
  type Mode,
  type Script,
  usage,
  userInput
} from "./fakes.js"
import { drainInFiber, makeBench } from "./fixtures.js"
import { sampleMany } from "./measure.js"

const versionOf = (pkg: string): string =>
  (createRequire(import.meta.url)(`${pkg}/package.json`) as { readonly version: string }).version

const STEPS = 10
const answer = answerDeltas.join("")

/**
 * What a program runs: a run of the step program, or one bare model call
 * (`disableToolCallResolution`, the reply a tool call).
 */
type Variant = "step" | "call"

/** A program ready to run: one run, and one run returning its thread's roles and final text. */
interface Program {
  readonly runOnce: Effect3.Effect<void, unknown>
  readonly check: () => Promise<{ readonly roles: string; readonly text: string }>
}

// ---------------------------------------------------------------------------
// Effect 3: @effect/ai 0.37
// ---------------------------------------------------------------------------

const effect3Program = async (mode: Mode, variant: Variant): Promise<Program> => {
  const script: Script = { toolSteps: variant === "step" ? STEPS : Number.POSITIVE_INFINITY, call: 0 }
  const { kit, layer } = makeToolkit(1)
  const [model, toolkit] = await Effect3.runPromise(Effect3.all([
    encodedModel(script),
    (kit as unknown as Effect3.Effect<Ai3.Toolkit.WithHandler<any>>).pipe(Effect3.provide(layer))
  ]))
  const user = Ai3.Prompt.makeMessage("user", { content: [Ai3.Prompt.makePart("text", { text: userInput })] })
  const reply = (thread: ReadonlyArray<Ai3.Prompt.Message>) => {
    const options: any = variant === "step"
      ? { prompt: Ai3.Prompt.fromMessages(thread), toolkit }
      : { prompt: Ai3.Prompt.fromMessages(thread), toolkit, disableToolCallResolution: true }
    if (mode === "generate") {
      return Effect3.map(
        model.generateText(options) as Effect3.Effect<Ai3.LanguageModel.GenerateTextResponse<any>, unknown>,
        (response) => response.content as ReadonlyArray<Ai3.Response.AnyPart>
      )
    }
    return Effect3.suspend(() => {
      const parts: Array<Ai3.Response.AnyPart> = []
      return Effect3.as(
        drainInFiber(model.streamText(options) as Stream3.Stream<Ai3.Response.AnyPart, unknown>, (chunk) => {
          for (const part of chunk) parts.push(part)
        }),
        parts
      )
    })
  }
  const run = Effect3.suspend(() => {
    script.call = 0
    const thread: Array<Ai3.Prompt.Message> = [user]
    const loop: Effect3.Effect<ReadonlyArray<Ai3.Prompt.Message>, unknown> = Effect3.flatMap(reply(thread), (parts) => {
      const added = Ai3.Prompt.fromResponseParts(parts).content
      for (const message of added) thread.push(message)
      return added.length === 2 && variant === "step" ? loop : Effect3.succeed(thread)
    })
    return loop
  })
  return {
    // run as the Effect 4 side is (one promise per run), so that the two pay the same for it
    runOnce: Effect3.promise(() => Effect3.runPromise(run)),
    check: async () => describe(await Effect3.runPromise(run))
  }
}

// ---------------------------------------------------------------------------
// Effect 4: effect/ai of effect 4.1.5
// ---------------------------------------------------------------------------

const usage4 = { inputTokens: { total: usage.inputTokens }, outputTokens: { total: usage.outputTokens } }
const toolCall4: Array<Ai4.Response.PartEncoded> = [
  { type: "tool-call", id: "call_1", name: "tool_0", params: callParams },
  { type: "finish", reason: "tool-calls", usage: usage4 }
]
const toolCallStream4 = toolCall4 as Array<Ai4.Response.StreamPartEncoded>
const text4: Array<Ai4.Response.PartEncoded> = [
  { type: "text", text: answer },
  { type: "finish", reason: "stop", usage: usage4 }
]
const textStream4: Array<Ai4.Response.StreamPartEncoded> = [
  { type: "text-start", id: "t" },
  { type: "text-delta", id: "t", delta: answerDeltas[0] },
  { type: "text-delta", id: "t", delta: answerDeltas[1] },
  { type: "text-end", id: "t" },
  { type: "finish", reason: "stop", usage: usage4 }
]

const effect4Program = async (mode: Mode, variant: Variant): Promise<Program> => {
  const { Effect, Schema, Stream } = E4
  const script: Script = { toolSteps: variant === "step" ? STEPS : Number.POSITIVE_INFINITY, call: 0 }
  const tool = Ai4.Tool.make("tool_0", {
    description: "Benchmark tool 0: looks something up and returns a short answer.",
    parameters: Schema.Struct({ query: Schema.String, limit: Schema.Number }),
    success: Schema.String
  })
  const kit = Ai4.Toolkit.make(tool)
  const [model, toolkit] = await Effect.runPromise(Effect.all([
    Ai4.LanguageModel.make({
      generateText: () => Effect.sync(() => script.call++ < script.toolSteps ? toolCall4 : text4),
      streamText: () =>
        Stream.suspend(() => Stream.fromArray(script.call++ < script.toolSteps ? toolCallStream4 : textStream4))
    }),
    kit.pipe(Effect.provide(kit.toLayer({ tool_0: () => Effect.succeed("ok") })))
  ]))
  const user = Ai4.Prompt.makeMessage("user", { content: [Ai4.Prompt.makePart("text", { text: userInput })] })
  const reply = (thread: ReadonlyArray<Ai4.Prompt.Message>): E4.Effect.Effect<ReadonlyArray<any>, unknown> => {
    const options = { prompt: Ai4.Prompt.fromMessages(thread), toolkit, disableToolCallResolution: variant === "call" }
    if (mode === "generate") return Effect.map(model.generateText(options), (response) => response.content)
    return Effect.suspend(() => {
      const parts: Array<any> = []
      return Effect.as(
        Stream.runForEachArray(model.streamText(options), (array) =>
          Effect.sync(() => {
            for (const part of array) parts.push(part)
          })),
        parts
      )
    })
  }
  const run = Effect.suspend(() => {
    script.call = 0
    const thread: Array<Ai4.Prompt.Message> = [user]
    const loop: E4.Effect.Effect<ReadonlyArray<Ai4.Prompt.Message>, unknown> = Effect.flatMap(
      reply(thread),
      (parts) => {
        const added = Ai4.Prompt.fromResponseParts(parts).content
        for (const message of added) thread.push(message)
        return added.length === 2 && variant === "step" ? loop : Effect.succeed(thread)
      }
    )
    return loop
  })
  return {
    // the sampler runs Effect 3 effects: one Effect 4 run inside a promise
    runOnce: Effect3.promise(() => Effect.runPromise(run)),
    check: async () => describe(await Effect.runPromise(run))
  }
}

/** The thread's roles (one letter each) and the last message's text. */
const describe = (
  thread: ReadonlyArray<{ readonly role: string; readonly content: unknown }>
): { readonly roles: string; readonly text: string } => {
  const last = thread.at(-1)?.content
  const text = Array.isArray(last)
    ? last.map((part: { type: string; text?: string }) => part.type === "text" ? part.text : "").join("")
    : ""
  return { roles: thread.map((m) => m.role[0]).join(""), text }
}

// ---------------------------------------------------------------------------
// main
// ---------------------------------------------------------------------------

interface Row {
  readonly what: string
  readonly mode: Mode
  readonly runOnce: Effect3.Effect<void, unknown>
  /** Steps (or calls) per run: figures are per unit. */
  readonly units: number
}

const OURS = "Stepwise step (Effect 3)"
const stepOn = (version: 3 | 4) => `step program on Effect ${version}`
const callOn = (version: 3 | 4) => `one model call on Effect ${version}`

const buildRows = async (): Promise<Array<Row>> => {
  const rows: Array<Row> = []
  for (const mode of ["generate", "stream"] as const) {
    const bench = await Effect3.runPromise(makeBench({ model: "encoded", mode, middleware: 0, tools: 1, steps: STEPS }))
    const checked = await Effect3.runPromise(bench.check)
    if (checked.steps !== STEPS + 1 || checked.toolResults !== STEPS || checked.text !== answer) {
      throw new Error(`ours (${mode}) did not run as scripted: ${JSON.stringify(checked)}`)
    }
    rows.push({ what: OURS, mode, runOnce: bench.runOnce, units: STEPS })
    for (const version of [3, 4] as const) {
      const make = version === 3 ? effect3Program : effect4Program
      const step = await make(mode, "step")
      const ran = await step.check()
      if (ran.roles !== `u${"at".repeat(STEPS)}a` || ran.text !== answer) {
        throw new Error(`${stepOn(version)} (${mode}) did not run as scripted: ${JSON.stringify(ran)}`)
      }
      rows.push({ what: stepOn(version), mode, runOnce: step.runOnce, units: STEPS })
      const call = await make(mode, "call")
      const called = await call.check()
      if (called.roles !== "ua") {
        throw new Error(`${callOn(version)} (${mode}) did not answer with a tool call: ${JSON.stringify(called)}`)
      }
      rows.push({ what: callOn(version), mode, runOnce: call.runOnce, units: 1 })
    }
  }
  return rows
}

const main = async () => {
  const quick = process.argv.includes("--quick")
  const loadStart = os.loadavg()
  const rows = await buildRows()
  const sampling = quick
    ? { warmupMs: 200, minSampleMs: 30, samples: 5 }
    : { warmupMs: 1000, minSampleMs: 60, samples: 15 }
  const timed = await sampleMany(rows.map((r) => ({ effect: r.runOnce, unitsPerRun: r.units })), sampling)
  const cpu = (what: string, mode: Mode) => timed[rows.findIndex((r) => r.what === what && r.mode === mode)]!.cpuUs
  const f = (us: number) => Math.abs(us) >= 100 ? us.toFixed(0) : us.toFixed(1)
  const load = (l: ReadonlyArray<number>) => l.map((x) => x.toFixed(2)).join(" ")
  console.log(
    `Effect 4 (effect ${versionOf("effect4")}, effect/ai) beside Effect 3 (effect ${versionOf("effect")}, ` +
      `@effect/ai ${versionOf("@effect/ai")}); encoded fake, one tool; CPU µs per step (per call for the model ` +
      `calls), median of ${timed[0]!.batches} round-robin rounds; load average ${load(loadStart)} at start, ` +
      `${load(os.loadavg())} at end\n`
  )
  console.log("| | generate | stream | stream ÷ generate | stream − generate |")
  console.log("|---|---:|---:|---:|---:|")
  for (const what of [OURS, stepOn(3), stepOn(4), callOn(3), callOn(4)]) {
    const [g, s] = [cpu(what, "generate"), cpu(what, "stream")]
    console.log(`| ${what} | ${f(g)} | ${f(s)} | ${(s / g).toFixed(2)}× | ${f(s - g)} |`)
  }
  const ratio = (what: (v: 3 | 4) => string, mode: Mode) => (cpu(what(4), mode) / cpu(what(3), mode)).toFixed(2)
  const streaming = (what: string) => cpu(what, "stream") - cpu(what, "generate")
  console.log(
    `\nEffect 4 ÷ Effect 3: the step program ${ratio(stepOn, "generate")}× generated, ${ratio(stepOn, "stream")}× ` +
      `streamed; one model call ${ratio(callOn, "generate")}× generated, ${ratio(callOn, "stream")}× streamed. ` +
      `What streaming adds to a model call (stream − generate): ${f(streaming(callOn(3)))} µs on Effect 3, ` +
      `${f(streaming(callOn(4)))} µs on Effect 4; to our step: ${f(streaming(OURS))} µs.`
  )
}

await main()
