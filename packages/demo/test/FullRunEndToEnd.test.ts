/**
 * End to end: one full agent run over the real `@effect/ai-openai` client
 * (Responses API) against the fake OpenAI server on 127.0.0.1, with the
 * planning tool (`TodoList`), context editing (`ContextEditing` clearing old
 * tool results) and an approval (`HumanInTheLoop` gating `publish`).
 */
import * as Tool from "@effect/ai/Tool"
import * as Toolkit from "@effect/ai/Toolkit"
import { assert, describe, it } from "@effect/vitest"
import { Agent, Checkpointer } from "@stepwise-agent/core"
import * as ContextEditing from "@stepwise-agent/middleware/ContextEditing"
import * as HumanInTheLoop from "@stepwise-agent/middleware/HumanInTheLoop"
import * as TodoList from "@stepwise-agent/middleware/TodoList"
import * as FakeOpenAi from "@stepwise-agent/testing/FakeOpenAi"
import { Effect, Layer, Option, Ref, Schema } from "effect"
import { transcript } from "./transcript.js"

// ---------------------------------------------------------------------------
// the agent under test
// ---------------------------------------------------------------------------

const Search = Tool.make("search", {
  description: "Searches the web; returns the text of the best page.",
  parameters: { query: Schema.String },
  success: Schema.String
})

const Publish = Tool.make("publish", {
  description: "Publishes a post.",
  parameters: { text: Schema.String },
  success: Schema.String
})

const Tools = Toolkit.make(Search, Publish)

/** About 2000 characters: ~500 tokens by the approximate count. */
const page = (query: string) => `results for ${query}: ${"lorem ".repeat(330)}`

const systemPrompt = "You research topics and publish short posts."
const question = "Research Effect and publish a post about it."
const todos = [
  { content: "Research Effect", status: "in_progress" },
  { content: "Publish the post", status: "pending" }
] as const
const post = "Effect makes TypeScript programs typed, composable and testable."
const answer = "Published your post about Effect."

const script: ReadonlyArray<FakeOpenAi.Reply> = [
  FakeOpenAi.toolCalls([
    { callId: "call_todos_1", name: "write_todos", arguments: { todos } },
    { callId: "call_search_1", name: "search", arguments: { query: "Effect" } }
  ]),
  FakeOpenAi.toolCalls([{ callId: "call_search_2", name: "search", arguments: { query: "Effect agents" } }]),
  FakeOpenAi.toolCalls([{ callId: "call_publish_1", name: "publish", arguments: { text: post } }]),
  FakeOpenAi.text(answer)
]

const setup = Effect.gen(function*() {
  const server = yield* FakeOpenAi.make(script)
  const searched = yield* Ref.make<ReadonlyArray<string>>([])
  const published = yield* Ref.make<ReadonlyArray<string>>([])
  const clear = ContextEditing.clearToolUses({ trigger: 700, keep: 1, excludeTools: [TodoList.toolName] })
  const middleware = [
    TodoList.middleware(),
    ContextEditing.middleware({ edits: [clear] }),
    HumanInTheLoop.middleware({
      toolkit: Toolkit.merge(Tools, TodoList.toolkit),
      interruptOn: { publish: { allowedDecisions: ["approve", "reject"] } }
    })
  ] as const
  // built in the test's scope: the HTTP client must outlive `Agent.make`
  const model = yield* Layer.build(FakeOpenAi.languageModel(server))
  const agent = yield* Agent.make({ toolkit: Tools, systemPrompt, middleware }).pipe(
    Effect.provide(model),
    Effect.provide(Layer.mergeAll(
      Tools.toLayer({
        search: ({ query }) => Effect.as(Ref.update(searched, (all) => [...all, query]), page(query)),
        publish: ({ text }) => Effect.as(Ref.update(published, (all) => [...all, text]), "published")
      }),
      Checkpointer.layerMemory,
      TodoList.layer
    ))
  )
  return { server, agent, searched: Ref.get(searched), published: Ref.get(published) }
})

/** `call_id → output` of the tool results a request sent. */
const outputsOf = (body: FakeOpenAi.RequestBody): Record<string, string> =>
  Object.fromEntries(FakeOpenAi.functionCallOutputs(body).map((item) => [item.call_id!, item.output!]))

// ---------------------------------------------------------------------------
// the test
// ---------------------------------------------------------------------------

describe("full run end to end", () => {
  it.scoped("plans, clears old tool results in the request only, waits for an approval, then publishes once", () =>
    Effect.gen(function*() {
      const { agent, published, searched, server } = yield* setup

      // --- the run: two research steps, then a gated publish call -------------
      const first = yield* agent.run(question, { threadId: "post-1" })

      assert.strictEqual(first._tag, "Interrupted")
      if (first._tag !== "Interrupted") return
      assert.strictEqual(first.steps, 3)
      assert.strictEqual(first.interrupt.middleware, "humanInTheLoop")
      const approval = Schema.decodeUnknownSync(HumanInTheLoop.ApprovalRequest)(first.interrupt.value)
      assert.deepStrictEqual(
        approval.actionRequests.map((action) => [action.callId, action.toolName, action.args, action.allowedDecisions]),
        [["call_publish_1", "publish", { text: post }, ["approve", "reject"]]]
      )
      assert.deepStrictEqual(first.state.todos, todos)
      assert.deepStrictEqual(yield* searched, ["Effect", "Effect agents"])
      assert.deepStrictEqual(yield* published, [], "a gated tool does not run before the decision")
      assert.strictEqual((yield* server.requests).length, 3)
      const pending = Option.getOrThrow(yield* agent.thread("post-1"))
      assert.isTrue(Option.isSome(pending.pending))

      // --- resume with an approval: publish runs once, the model answers -----
      const done = yield* agent.resume("post-1", HumanInTheLoop.approveAll(approval))

      assert.strictEqual(done._tag, "Completed")
      if (done._tag !== "Completed") return
      assert.strictEqual(done.text, answer)
      assert.deepStrictEqual(yield* published, [post])
      assert.deepStrictEqual(yield* searched, ["Effect", "Effect agents"])
      assert.deepStrictEqual(done.state.todos, todos)
      assert.strictEqual(yield* server.remaining, 0)

      // --- what the provider was sent -----------------------------------------
      const requests = (yield* server.requests).map((request) => request.body)
      assert.strictEqual(requests.length, 4)
      for (const body of requests) {
        assert.deepStrictEqual(
          (body.tools ?? []).map((tool) => tool.name).sort(),
          ["publish", "search", "write_todos"]
        )
        // TodoList appends its planning prompt to the agent's system prompt
        const system = FakeOpenAi.inputSummary(body)[0]!
        assert.isTrue(system.startsWith(`system:${systemPrompt}`))
        assert.include(system, "write_todos")
      }
      const cleared = JSON.stringify("[cleared]")
      // request 2: one search result, the newest (keep: 1), sent whole
      assert.deepStrictEqual(Object.keys(outputsOf(requests[1]!)), ["call_todos_1", "call_search_1"])
      assert.strictEqual(outputsOf(requests[1]!)["call_search_1"], JSON.stringify(page("Effect")))
      // request 3: over the trigger; the older search result is cleared, the newest kept
      assert.strictEqual(outputsOf(requests[2]!)["call_search_1"], cleared)
      assert.strictEqual(outputsOf(requests[2]!)["call_search_2"], JSON.stringify(page("Effect agents")))
      // request 4 (after the resume): both searches cleared, the publish result kept
      assert.deepStrictEqual(outputsOf(requests[3]!), {
        call_todos_1: outputsOf(requests[1]!)["call_todos_1"]!,
        call_search_1: cleared,
        call_search_2: cleared,
        call_publish_1: JSON.stringify("published")
      })
      // write_todos is excluded from clearing: its result is sent in full every time
      assert.notStrictEqual(outputsOf(requests[1]!)["call_todos_1"], cleared)
      // every call sent is still answered by its result (nothing removed)
      for (const body of requests) {
        assert.deepStrictEqual(
          FakeOpenAi.functionCalls(body).map((item) => item.call_id),
          FakeOpenAi.functionCallOutputs(body).map((item) => item.call_id)
        )
      }

      // --- the stored thread keeps every original result ----------------------
      const thread = Option.getOrThrow(yield* agent.thread("post-1"))
      assert.isTrue(Option.isNone(thread.pending))
      const stored = thread.state.messages.flatMap((message) => message.role === "tool" ? message.content : [])
      assert.deepStrictEqual(stored.map((part) => [part.id, part.result]), [
        ["call_todos_1", { message: "Updated the todo list (2 items).", todos }],
        ["call_search_1", page("Effect")],
        ["call_search_2", page("Effect agents")],
        ["call_publish_1", "published"]
      ])
      assert.isFalse(stored.some(ContextEditing.isCleared))
      assert.deepStrictEqual(transcript(thread.state.messages, "short"), [
        `user: ${question}`,
        "assistant: call call_todos_1 write_todos | call call_search_1 search",
        "tool: call_todos_1 {…} | call_search_1 results for Effect: ",
        "assistant: call call_search_2 search",
        "tool: call_search_2 results for Effect a",
        "assistant: call call_publish_1 publish",
        "tool: call_publish_1 published",
        `assistant: ${answer}`
      ])
    }))
})
