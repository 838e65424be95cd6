/**
 * A tool's result that quotes a registered credential (a failure, a success echoing the environment) reaches the
 * inspector's event log and thread API scrubbed: the agent scrubs it where it is made.
 */
import { LanguageModel, Tool, Toolkit } from "@effect/ai"
import { assert, describe, it } from "@effect/vitest"
import { Agent, Secrets } from "@stepwise-agent/core"
import { ScriptedModel } from "@stepwise-agent/testing"
import { Effect, Schema } from "effect"
import * as Inspector from "../src/Inspector.js"

const key = "Zx9qWv3LmN7pRt2YbK5sHj8dFg4"
const Env = Tool.make("env", { parameters: {}, success: Schema.String })
const Fails = Tool.make("fails", { parameters: {}, success: Schema.String, failure: Schema.String })
const Tools = Toolkit.make(Env, Fails)

/** The inspector's event log up to the end of the run. */
const eventLog = (base: string, token: string) =>
  Effect.promise(async () => {
    const response = await fetch(`${base}/events?token=${token}`, { signal: AbortSignal.timeout(10_000) })
    const reader = response.body!.getReader()
    const decoder = new TextDecoder()
    let text = ""
    while (!text.includes("RunEnded")) text += decoder.decode((await reader.read()).value, { stream: true })
    await reader.cancel()
    return text
  })

describe("Inspector: tool results quoting a registered credential", () => {
  it.scopedLive("the event log and the thread API show them scrubbed", () =>
    Effect.gen(function*() {
      yield* Secrets.register(key)
      const { model } = yield* ScriptedModel.make([
        ScriptedModel.toolCalls([{ name: "env", params: {}, id: "c1" }, { name: "fails", params: {}, id: "c2" }]),
        ScriptedModel.text("done")
      ])
      const agent = yield* Agent.make({ toolkit: Tools }).pipe(
        Effect.provide(Tools.toLayer({
          env: () => Effect.succeed(`OPENAI_API_KEY=${key}\nPATH=/bin`),
          fails: () => Effect.fail(`could not auth with ${key}`)
        })),
        Effect.provideService(LanguageModel.LanguageModel, model)
      )
      const inspector = yield* Inspector.make(agent)
      const token = new URL(inspector.url).searchParams.get("token")!
      const base = `http://127.0.0.1:${inspector.port}`
      yield* agent.run("show env", { threadId: "t1" })
      const events = yield* eventLog(base, token)
      assert.include(events, "ToolCallCompleted")
      assert.notInclude(events, key)
      const thread = yield* Effect.promise(() =>
        fetch(`${base}/api/threads/t1?token=${token}`).then((response) => response.text())
      )
      assert.include(thread, `could not auth with ${Secrets.redacted}`)
      assert.notInclude(thread, key)
    }))
})
