import { Prompt } from "@effect/ai"
import { assert, describe, it } from "@effect/vitest"
import { Agent, Middleware } from "@stepwise-agent/core"
import { Arbitraries, Messages, ScriptedModel } from "@stepwise-agent/testing"
import { Effect, FastCheck } from "effect"
import * as Lineage from "../src/internal/fast/lineage.js"
import { paired } from "../src/internal/fast/pairing.js"

const result = (id: string) => Messages.toolResult(id, "search", `found ${id}`)
const user = Messages.user
const assistant = (...ids: ReadonlyArray<string>) => Messages.calls(...ids.map((id) => Messages.toolCall(id, "search")))
const tool = (...ids: ReadonlyArray<string>) => Prompt.makeMessage("tool", { content: ids.map(result) })

/** Runs `history` as the input of one run and gives the messages the model received and the stored ones. */
const sent = (history: ReadonlyArray<Prompt.Message>) =>
  Effect.gen(function*() {
    const agent = yield* Agent.make({})
    const run = yield* agent.run(history, { threadId: "t" })
    const [request] = yield* ScriptedModel.requests
    return { prompt: request!.prompt.content, stored: run.state.messages }
  }).pipe(Effect.provide(ScriptedModel.layer([ScriptedModel.text("ok")])))

/** The history with `orphans` results of no call inserted and the results at `dropped` removed. */
const damaged = (
  history: ReadonlyArray<Prompt.Message>,
  orphans: ReadonlyArray<number>,
  dropped: ReadonlyArray<number>
): Array<Prompt.Message> => {
  let n = 0
  const out: Array<Prompt.Message> = history.map((message) =>
    message.role !== "tool"
      ? message
      : Prompt.makeMessage("tool", { content: message.content.filter(() => !dropped.includes(n++)) })
  ).filter((message) => message.role !== "tool" || message.content.length > 0)
  orphans.forEach((at, i) => out.splice(at % (out.length + 1), 0, tool(`orphan_${i}`)))
  return out
}

describe("every request the model receives pairs tool calls and results", () => {
  it.effect("a result without its call in the input history is not sent, and takes no place", () =>
    Effect.gen(function*() {
      const history = [user("find"), tool("ghost"), assistant("c1"), tool("c1", "ghost2"), user("go")]
      const { prompt, stored } = yield* sent(history)
      assert.deepStrictEqual(prompt, [user("find"), assistant("c1"), tool("c1"), user("go")])
      // the stored thread keeps the input as given
      assert.deepStrictEqual(stored.slice(0, 5), history)
    }))

  it.effect("a call without its result gets a failed \"not run\" result before the next message", () =>
    Effect.gen(function*() {
      const { prompt } = yield* sent([user("find"), assistant("c1", "c2"), tool("c2"), user("go")])
      assert.deepStrictEqual(Arbitraries.problems(prompt), [])
      const results = (prompt[2] as Prompt.ToolMessage).content
      assert.deepStrictEqual(results.map((part) => [part.id, part.isFailure]), [["c2", false], ["c1", true]])
      assert.deepStrictEqual(results[1]!.result, { error: "Not run: the call has no result in the conversation" })
    }))

  it.effect.prop(
    "for any history with orphan results and missing results, the request is well-formed",
    {
      history: Arbitraries.conversation({ maxTurns: 4, maxResultSize: 20 }),
      orphans: FastCheck.array(FastCheck.nat(), { maxLength: 3 }),
      dropped: FastCheck.array(FastCheck.nat({ max: 12 }), { maxLength: 3 })
    },
    ({ dropped, history, orphans }) =>
      Effect.gen(function*() {
        const input = [...damaged(history, orphans, dropped), user("go")]
        const { prompt, stored } = yield* sent(input)
        assert.deepStrictEqual(Arbitraries.problems(prompt), [])
        // every real result given is sent; no orphan is
        const ids = (messages: ReadonlyArray<Prompt.Message>) =>
          messages.flatMap((m) => m.role === "tool" ? m.content.map((part) => part.id) : [])
        const given = ids(input).filter((id) => !id.startsWith("orphan_"))
        assert.deepStrictEqual(ids(prompt).filter((id) => given.includes(id)).sort(), given.sort())
        assert.isFalse(ids(prompt).some((id) => id.startsWith("orphan_")))
        assert.deepStrictEqual(stored.slice(0, input.length), input)
      }),
    { fastCheck: { numRuns: 40 } }
  )

  it.prop(
    "a thread that extends one already found paired pairs as it would from scratch",
    {
      history: Arbitraries.conversation({ maxTurns: 4, maxResultSize: 20 }),
      more: Arbitraries.conversation({ maxTurns: 3, maxResultSize: 20 }),
      orphans: FastCheck.array(FastCheck.nat(), { maxLength: 2 }),
      dropped: FastCheck.array(FastCheck.nat({ max: 12 }), { maxLength: 2 }),
      skip: FastCheck.nat({ max: 3 }),
      cut: FastCheck.nat()
    },
    ({ cut, dropped, history, more, orphans, skip }) => {
      // a paired prefix, then messages (damaged or not) appended to the same message objects
      const prefix = [...history]
      if (paired(prefix) !== prefix) return
      // the appended part may start anywhere in a turn (with a call, or with results)
      const tail = damaged(more, orphans, dropped).slice(skip)
      const added = tail.slice(0, cut % (tail.length + 1))
      const grown = [...prefix, ...added]
      // the same messages in a fresh array of fresh copies: no cache applies
      const fresh = grown.map((message) => Prompt.makeMessage(message.role as any, { ...message } as any))
      assert.deepStrictEqual(paired(grown), paired(fresh))
      // appended as the loop appends (recorded as extending the prefix, so checked from where it ends), twice:
      // the second append to the same prefix forks from the first
      assert.deepStrictEqual(paired(Lineage.append(prefix, added)), paired(fresh))
      assert.deepStrictEqual(paired(Lineage.append(prefix, added)), paired(fresh))
    },
    { fastCheck: { numRuns: 200 } }
  )

  it.prop(
    "any thread pairs as the plain rule says: duplicate ids, results out of order or missing, calls the provider ran, many calls",
    {
      turns: FastCheck.array(
        FastCheck.record({
          // ids from a small pool, so that a message may call the same id twice and results may answer either
          calls: FastCheck.array(
            FastCheck.record({ id: FastCheck.constantFrom("a", "b", "c", "d"), byProvider: FastCheck.boolean() }),
            { maxLength: 12 }
          ),
          results: FastCheck.array(
            FastCheck.array(FastCheck.constantFrom("a", "b", "c", "d", "x"), { maxLength: 12 }),
            { maxLength: 2 }
          ),
          // answer the calls in order first (what a run appends), then what `results` says
          inOrder: FastCheck.boolean(),
          userAfter: FastCheck.boolean()
        }),
        { maxLength: 4 }
      )
    },
    ({ turns }) => {
      const thread: Array<Prompt.Message> = [user("hi")]
      let n = 0
      for (const turn of turns) {
        thread.push(Prompt.makeMessage("assistant", {
          content: turn.calls.map(({ byProvider, id }) =>
            Prompt.makePart("tool-call", { id, name: `t${n++}`, params: {}, providerExecuted: byProvider })
          )
        }))
        const ids = turn.calls.filter((c) => !c.byProvider).map((c) => c.id)
        if (turn.inOrder && ids.length > 0) thread.push(tool(...ids))
        for (const results of turn.results) if (results.length > 0) thread.push(tool(...results))
        if (turn.userAfter) thread.push(user("more"))
      }
      assert.deepStrictEqual(paired(thread), pairedPlainly(thread))
      // and grown message by message, as a run grows it (each array continuing the one before)
      let grown: ReadonlyArray<Prompt.Message> = []
      for (const message of thread) {
        grown = Lineage.append(grown, [message])
        assert.deepStrictEqual(paired(grown), pairedPlainly(grown))
      }
    },
    { fastCheck: { numRuns: 300 } }
  )
})

/** The pairing rule, applied from scratch with a table of the open calls (what `paired` must agree with). */
const pairedPlainly = (messages: ReadonlyArray<Prompt.Message>): ReadonlyArray<Prompt.Message> => {
  const out: Array<Prompt.Message> = []
  let open = new Map<string, Prompt.ToolCallPart>()
  let inToolRun = false
  const close = () => {
    if (open.size === 0) return
    const results = Array.from(
      open.values(),
      (call) =>
        Middleware.toolResult(call, { error: "Not run: the call has no result in the conversation" }, {
          isFailure: true
        })
    )
    const last = out[out.length - 1]
    if (last !== undefined && last.role === "tool") {
      out[out.length - 1] = Prompt.makeMessage("tool", {
        content: [...last.content, ...results],
        options: last.options
      })
    } else out.push(Prompt.makeMessage("tool", { content: results }))
    open = new Map()
  }
  for (const message of messages) {
    if (message.role !== "tool") {
      close()
      inToolRun = message.role === "assistant"
      if (message.role === "assistant") {
        for (const part of message.content) {
          if (part.type === "tool-call" && !part.providerExecuted) open.set(part.id, part)
        }
      }
      out.push(message)
      continue
    }
    const kept = message.content.filter((part) => inToolRun && open.delete(part.id))
    if (kept.length === message.content.length) out.push(message)
    else if (kept.length > 0) out.push(Prompt.makeMessage("tool", { content: kept, options: message.options }))
  }
  close()
  return out
}
