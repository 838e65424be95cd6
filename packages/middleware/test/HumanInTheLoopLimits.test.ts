import { LanguageModel, Tool, Toolkit } from "@effect/ai"
import { assert, describe, it } from "@effect/vitest"
import { Agent, AgentError } from "@stepwise-agent/core"
import { ScriptedModel } from "@stepwise-agent/testing"
import { Effect, Option, Ref, Schema } from "effect"
import * as HumanInTheLoop from "../src/HumanInTheLoop.js"

// What a person types when deciding (an answer, a reason, edited arguments)
// is bounded by the agent's maxInputChars, as what they type as input is,
// and refused with the same InvalidInput.

const SendEmail = Tool.make("send_email", {
  description: "Sends an email",
  parameters: { to: Schema.String, body: Schema.String },
  success: Schema.String
})
const Tools = Toolkit.make(SendEmail)

const maxInputChars = 2_000

const setup = Effect.gen(function*() {
  const log = yield* Ref.make<ReadonlyArray<string>>([])
  const model = yield* ScriptedModel.make([
    ScriptedModel.toolCalls([{ name: "send_email", params: { to: "boss@x.y", body: "I quit" }, id: "e1" }]),
    ScriptedModel.text("noted")
  ])
  const agent = yield* Agent.make({
    toolkit: Tools,
    maxInputChars,
    middleware: [HumanInTheLoop.middleware({ toolkit: Tools, interruptOn: { send_email: true } })]
  }).pipe(
    Effect.provide(Tools.toLayer({
      send_email: ({ body }) => Effect.as(Ref.update(log, (all) => [...all, body]), "sent")
    })),
    Effect.provideService(LanguageModel.LanguageModel, model.model)
  )
  yield* agent.run("email my boss", { threadId: "t" })
  const pending = Option.getOrThrow(Option.flatMap(yield* agent.thread("t"), (thread) => thread.pending))
  const request = Schema.decodeUnknownSync(HumanInTheLoop.ApprovalRequest)(pending.value)
  return { agent, action: request.actionRequests[0]!, log: Ref.get(log) }
})

/** The characters a decision holds as the agent counts them: every string and every key, however deep. */
const sizeOf = (value: unknown): number =>
  typeof value === "string"
    ? value.length
    : Array.isArray(value)
    ? value.reduce((sum: number, item) => sum + sizeOf(item), 0)
    : typeof value === "object" && value !== null
    ? Object.entries(value).reduce((sum, [key, item]) => sum + key.length + sizeOf(item), 0)
    : 0

const kinds: ReadonlyArray<
  readonly [string, (action: HumanInTheLoop.ActionRequest, text: string) => HumanInTheLoop.Decision]
> = [
  ["respond", (action, text) => HumanInTheLoop.respond(action, text)],
  ["reject", (action, text) => HumanInTheLoop.reject(action, text)],
  ["edit", (action, text) => HumanInTheLoop.edit(action, { to: "boss@x.y", body: text })]
]

describe("a person's decision is bounded by maxInputChars", () => {
  for (const [kind, decide] of kinds) {
    it.effect(`${kind}: a decision over the limit is refused with InvalidInput, changing nothing; at the limit it is taken`, () =>
      Effect.gen(function*() {
        const { action, agent, log } = yield* setup
        const room = maxInputChars - sizeOf([decide(action, "")])
        const over = [decide(action, "x".repeat(room + 1))]
        assert.strictEqual(sizeOf(over), maxInputChars + 1)
        const error = yield* Effect.flip(agent.resume("t", over))
        assert.isTrue(error instanceof AgentError.InvalidInput, String(error))
        assert.include(error.message, "maxInputChars")
        // the durable check refuses it the same way
        const validated = yield* Effect.flip(agent.validateResume("t", over))
        assert.isTrue(validated instanceof AgentError.InvalidInput, String(validated))
        // nothing changed: the thread still waits, nothing ran
        assert.isTrue(Option.isSome(Option.flatMap(yield* agent.thread("t"), (thread) => thread.pending)))
        assert.deepStrictEqual(yield* log, [])
        const at = [decide(action, "x".repeat(room))]
        assert.strictEqual(sizeOf(at), maxInputChars)
        const result = yield* agent.resume("t", at)
        assert.strictEqual(result._tag, "Completed")
      }))
  }

  it.effect("a 16 MB answer is refused at once", () =>
    Effect.gen(function*() {
      const { action, agent } = yield* setup
      const started = performance.now()
      const error = yield* Effect.flip(agent.resume("t", [HumanInTheLoop.respond(action, "x".repeat(16 << 20))]))
      assert.isTrue(error instanceof AgentError.InvalidInput)
      assert.isBelow(performance.now() - started, 2_000)
      // the error does not quote the text
      assert.isBelow(error.message.length, 300)
    }), 30_000)
})
