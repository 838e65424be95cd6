/**
 * `npm run demo -- --replay`: a run kept as a value. Records a run of the
 * demo agent (`RunRecord.record`), writes it as JSONL and reads it back,
 * replays it on the same agent (no model or tool call), changes the system
 * prompt and replays again to show the first divergence (the step and the
 * field), then forks the record from step 2 onto the new prompt with a
 * message and lets the fork continue live. Always on the scripted model: no
 * network, no key.
 *
 * @since 0.1.0
 */
import { NodeContext, NodeRuntime } from "@effect/platform-node"
import { Agent, Checkpointer, RunRecord } from "@stepwise-agent/core"
import { ScriptedModel } from "@stepwise-agent/testing"
import { Console, Effect, Layer } from "effect"
import { DemoToolkit, layerHandlers } from "./DemoTools.js"

const threadId = "shopping"
const question = "What does the weekend shopping list in my files cost in total?"
const systemPrompt = "You answer questions about the user's files. Use the tools, and do arithmetic with calculate."
const changedPrompt = `${systemPrompt} Answer in whole euros.`
const forkMessage = "Round the total to whole euros, please."

/** The recorded run (steps 0 to 3), then the fork's live steps (2 and 3 again, on the new prompt). */
const script: ReadonlyArray<ScriptedModel.Turn> = [
  ScriptedModel.toolCalls([{ id: "call_list", name: "list_files", params: {} }]),
  ScriptedModel.toolCalls([{ id: "call_read", name: "read_file", params: { path: "shopping-list.txt" } }]),
  ScriptedModel.toolCalls([
    { id: "call_total", name: "calculate", params: { expression: "3 * 2.50 + 4 * 1.25 + 12.80" } }
  ]),
  ScriptedModel.text("The weekend shopping costs 25.30 in total."),
  // the fork, live from step 2
  ScriptedModel.toolCalls([
    { id: "call_round", name: "calculate", params: { expression: "(3 * 2.50 + 4 * 1.25 + 12.80) - 0.30" } }
  ]),
  ScriptedModel.text("The weekend shopping costs about 25 euros.")
]

const show = (value: unknown, max = 100) => {
  const text = typeof value === "string" ? value : JSON.stringify(value) ?? "nothing"
  return text.length > max ? `${text.slice(0, max - 3)}...` : text
}

/** The model calls the scripted model answered so far. */
const modelCalls = Effect.map(ScriptedModel.requests, (requests) => requests.length)

const program = Effect.gen(function*() {
  const agent = yield* Agent.make({ toolkit: DemoToolkit, systemPrompt, maxSteps: 8 })

  yield* Console.log(`── 1. record a run on thread "${threadId}"\nUser: ${question}`)
  const { record, result } = yield* RunRecord.record(agent, question, { threadId })
  for (const entry of record.entries) {
    if (entry._tag === "Step" && entry.kind === "Tool") {
      // a tool step keeps the tool's result part, encoded
      yield* Console.log(`   ${entry.name}: ${show((entry.result as { readonly result?: unknown }).result)}`)
    }
  }
  const jsonl = RunRecord.toJsonl(record)
  const models = record.entries.filter((entry) => entry._tag === "Step" && entry.kind === "Model").length
  yield* Console.log(
    `   answered: ${result._tag === "Completed" ? result.text : result._tag}\n` +
      `   record: ${models} model steps, ${jsonl.split("\n").filter((line) => line !== "").length} JSONL lines, ` +
      `${new TextEncoder().encode(jsonl).length} bytes`
  )

  yield* Console.log("\n── 2. read the JSONL back and replay it on the same agent")
  const read = yield* RunRecord.fromJsonl(jsonl)
  const callsBefore = yield* modelCalls
  const replayed = yield* agent.replay(read)
  yield* Console.log(
    `   replayed: ${replayed._tag === "Completed" ? replayed.text : replayed._tag} ` +
      `(model calls made: ${(yield* modelCalls) - callsBefore})`
  )

  yield* Console.log("\n── 3. change the system prompt and replay")
  const changed = yield* Agent.make({ toolkit: DemoToolkit, systemPrompt: changedPrompt, maxSteps: 8 })
  const diverged = yield* Effect.flip(changed.replay(read))
  if (diverged._tag !== "ReplayDiverged") return yield* Effect.fail(diverged)
  yield* Console.log(
    `   the replay diverged at step ${diverged.step}, field ${diverged.field}\n` +
      `     recorded: ${show(JSON.stringify(diverged.recorded), 200)}\n` +
      `     actual:   ${show(JSON.stringify(diverged.actual), 200)}`
  )

  yield* Console.log(`\n── 4. fork the record from step 2 onto the new prompt, with a message, and continue live`)
  const source = yield* agent.thread(threadId)
  const callsBeforeFork = yield* modelCalls
  const forked = yield* changed.fork(read, {
    to: `${threadId}-fork`,
    at: 2,
    edit: { _tag: "Message", message: forkMessage }
  })
  const forkedMessages = forked.state.messages
  yield* Console.log(
    `   steps 0 and 1 served from the record, live from step 2 (model calls made: ${
      (yield* modelCalls) - callsBeforeFork
    })\n` +
      `   fork answered: ${forked._tag === "Completed" ? forked.text : forked._tag}\n` +
      `   thread "${threadId}-fork": ${forkedMessages.length} messages; thread "${threadId}" ` +
      `${JSON.stringify(yield* agent.thread(threadId)) === JSON.stringify(source) ? "untouched" : "CHANGED"}`
  )
})

/**
 * Runs the replay demo and exits.
 *
 * @example
 * ```ts
 * import { main } from "./replay.js"
 *
 * main("packages/demo/data")
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const main = (dataDirectory: string): void =>
  program.pipe(
    Effect.provide(
      Layer.mergeAll(ScriptedModel.layer(script), Checkpointer.layerMemory, layerHandlers(dataDirectory)).pipe(
        Layer.provide(NodeContext.layer)
      )
    ),
    NodeRuntime.runMain
  )
