/**
 * Micro-measurements of the pieces a step is made of, so the step figures
 * can be read: what one hook wrapper (`Effect.locally` + `Effect.withSpan`,
 * as the loop's `inHook` does) costs, what a bounded-concurrency
 * `Effect.forEach` of one tool call costs, what checkpoint encoding and
 * thread decoding cost per message, what a `TodoList` service write costs
 * with many threads stored.
 *
 * @since 0.1.0
 */
import { Prompt, Response } from "@effect/ai"
import { AgentState, Middleware, Usage } from "@stepwise-agent/core"
import { TodoList } from "@stepwise-agent/middleware"
import { Context, Effect } from "effect"
import { type Sample, sample, type SampleOptions } from "./measure.js"
import * as SubAgentStep from "./subAgentStep.js"

/**
 * @since 0.1.0
 * @category models
 */
export interface MicroResult {
  readonly name: string
  /** What the loop does with it, per step or per run. */
  readonly note: string
  readonly result: Sample
}

const repeatEffect = (make: () => Effect.Effect<unknown>, times: number): Effect.Effect<void> => {
  const body = make()
  return Effect.gen(function*() {
    for (let i = 0; i < times; i++) yield* body
  })
}

const repeatSync = (f: () => unknown, times: number): Effect.Effect<void> =>
  Effect.sync(() => {
    for (let i = 0; i < times; i++) f()
  })

/** `n` messages as a step adds them: an assistant tool call, then its tool result. */
const makeStepMessages = (n: number): Array<Prompt.Message> => {
  const out: Array<Prompt.Message> = []
  for (let i = 0; out.length < n; i++) {
    const id = `call_${i}`
    out.push(Prompt.makeMessage("assistant", {
      content: [
        Prompt.makePart("tool-call", { id, name: "tool_0", params: { query: "q", limit: 3 }, providerExecuted: false })
      ]
    }))
    out.push(Prompt.makeMessage("tool", {
      content: [
        Prompt.makePart("tool-result", { id, name: "tool_0", result: "ok", isFailure: false, providerExecuted: false })
      ]
    }))
  }
  return out
}

/**
 * Runs the micro-measurements.
 *
 * @since 0.1.0
 * @category constructors
 */
export const measure = async (sampling: SampleOptions): Promise<Array<MicroResult>> => {
  const out: Array<MicroResult> = []
  const run = async (name: string, note: string, workload: Effect.Effect<void, unknown>, perRun: number) => {
    const result = await sample(workload, { ...sampling, unitsPerRun: perRun })
    console.log(`  ${name.padEnd(58)} ${result.cpuUs.toFixed(2).padStart(9)} µs CPU`)
    out.push({ name, note, result })
  }
  const n = 500
  const span = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
    Effect.withSpan(effect, "Middleware.beforeModel", { attributes: { middleware: "m" }, captureStackTrace: false })
  const locally = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
    Middleware.reportingAs(effect, { middleware: "m", hook: "beforeModel" })
  await run("`yield* Effect.void` (baseline)", "", repeatEffect(() => Effect.void, n), n)
  await run(
    "`Effect.locally(CurrentHook)` + `Effect.withSpan` around a no-op",
    "`inHook` when traced (a tracer installed, or `spans: true`): per hook call, 4 per step per pass-through middleware",
    repeatEffect(() => span(locally(Effect.void)), n),
    n
  )
  await run(
    "`Effect.withSpan` around a no-op",
    "`Agent.modelCall`, `Agent.toolCall` when traced: 2 per step",
    repeatEffect(() => span(Effect.void), n),
    n
  )
  await run(
    "`Effect.locally` around a no-op",
    "`inHook` when streaming and untraced: per hook call",
    repeatEffect(() => locally(Effect.void), n),
    n
  )
  await run(
    "`Effect.forEach([call], f, { concurrency: 8 })`",
    "`runTools`: once per tool step (default `toolConcurrency` 8)",
    repeatEffect(() => Effect.forEach([1], (x) => Effect.succeed(x), { concurrency: 8 }), n),
    n
  )
  await run(
    "`Effect.forEach([call], f)` (sequential)",
    "",
    repeatEffect(() => Effect.forEach([1], (x) => Effect.succeed(x)), n),
    n
  )
  const context = Context.make(Context.GenericTag<"bench/A", number>("bench/A"), 1)
  await run(
    "`Effect.provide(context)` around a no-op",
    "each tool call (`internal/tools.ts`), each run",
    repeatEffect(() => Effect.provide(Effect.void, context), n),
    n
  )
  const total = Usage.empty
  const usage = new Response.Usage({ inputTokens: 10, outputTokens: 5, totalTokens: 15 })
  await run(
    "`Usage.add` (a validating `Schema.Class` constructor)",
    "once per step",
    repeatSync(() => Usage.add(total, usage), 5000),
    5000
  )
  const parts = [
    Response.makePart("tool-call", { id: "c", name: "tool_0", params: { q: 1 }, providerExecuted: false }),
    Response.makePart("finish", { reason: "tool-calls", usage })
  ]
  await run(
    "`Prompt.fromResponseParts` (one tool call)",
    "once per step",
    repeatSync(() => Prompt.fromResponseParts(parts), 2000),
    2000
  )
  const m200 = makeStepMessages(200)
  const m10k = makeStepMessages(10_000)
  AgentState.encodeMessages(m200)
  AgentState.encodeMessages(m10k)
  await run(
    "`AgentState.encodeMessages`, 200 cached messages",
    "every checkpoint (each tool step and the end of a run)",
    repeatSync(() => AgentState.encodeMessages(m200), 200),
    200
  )
  await run(
    "`AgentState.encodeMessages`, 10,000 cached messages",
    "every checkpoint, on a 10,000-message thread",
    repeatSync(() => AgentState.encodeMessages(m10k), 5),
    5
  )
  // a new message is built and then encoded; time both and keep the difference
  const built = await sample(Effect.sync(() => makeStepMessages(100)), { ...sampling, unitsPerRun: 100 })
  const builtAndEncoded = await sample(Effect.sync(() => AgentState.encodeMessages(makeStepMessages(100))), {
    ...sampling,
    unitsPerRun: 100
  })
  const encodeNew = { ...builtAndEncoded, cpuUs: builtAndEncoded.cpuUs - built.cpuUs }
  console.log(
    `  encode a new message: ${encodeNew.cpuUs.toFixed(2)} µs CPU (building it: ${built.cpuUs.toFixed(2)} µs)`
  )
  out.push({
    name: "`AgentState.encodeMessages`, per new (uncached) message",
    note: "every step adds two (assistant tool call, tool result); the next checkpoint encodes them",
    result: encodeNew
  })
  out.push({
    name: "`Prompt.makeMessage` + `Prompt.makePart`, per message",
    note: "`Prompt.fromResponseParts`, `Middleware.toolResult`, `appendToolResults`: a few per step",
    result: built
  })
  const encoded = AgentState.encodeMessages(makeStepMessages(1000))
  await run(
    "`AgentState.decodeMessages`, per message (tool calls and results)",
    "every run loads its thread and decodes every message",
    Effect.asVoid(AgentState.decodeMessages(encoded)),
    1000
  )
  const todoList = await Effect.runPromise(TodoList.make)
  for (let i = 0; i < 20_000; i++) {
    await Effect.runPromise(todoList.write(`thread-${i}`, [{ content: `task ${i}`, status: "pending" }]))
  }
  const lists = [[{ content: "a", status: "pending" as const }], [{ content: "a", status: "completed" as const }]]
  let writes = 0
  await run(
    "`TodoList` service write, 20,000 threads stored",
    "each successful `write_todos`; the cost does not grow with the threads",
    repeatEffect(() => Effect.suspend(() => todoList.write("thread-0", lists[writes++ % 2]!)), n),
    n
  )
  // what a SubAgents `task` call adds to a step (per parent run; see subAgentStep.ts)
  for (const row of await SubAgentStep.measure(sampling)) {
    console.log(`  ${row.name.padEnd(58)} ${row.result.cpuUs.toFixed(2).padStart(9)} µs CPU`)
    out.push(row)
  }
  return out
}
