/**
 * What a run's hooks find around them: where its events go (a context
 * reference the run sets, `Middleware.eventSink`), where decisions are filed,
 * and which hook runs. Core keeps a fiber ref only where a value must be a
 * fiber's own; the rest travels in the context, also into a step a journal
 * runs on a runtime of its own.
 */
import { assert, describe, it } from "@effect/vitest"
import { Agent, type AgentEvent, Middleware, RunJournal } from "@stepwise-agent/core"
import { ScriptedModel } from "@stepwise-agent/testing"
import { Chunk, Effect, Layer, Runtime, Stream } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { Calculator, CalculatorLive } from "./utils.js"

const src = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../src")

const sourceFiles = (dir: string): Array<string> =>
  fs.readdirSync(dir, { withFileTypes: true }).flatMap((entry) =>
    entry.isDirectory()
      ? sourceFiles(path.join(dir, entry.name))
      : entry.name.endsWith(".ts")
      ? [path.join(dir, entry.name)]
      : []
  )

const decisionsOf = (events: ReadonlyArray<AgentEvent.AgentEvent<any, any>>) =>
  events.flatMap((event) =>
    event._tag === "MiddlewareDecision" ? [`${event.middleware}/${event.hook}: ${event.decision}`] : []
  )

describe("what a run's hooks find around them", () => {
  it("core makes a fiber ref only for a fiber's own value, the running hook; the tool-call guards are a context reference", () => {
    const made = sourceFiles(src).flatMap((file) =>
      [...fs.readFileSync(file, "utf8").matchAll(/FiberRef\.(unsafeMake|make)\b/g)].map(() => path.relative(src, file))
    )
    assert.deepStrictEqual(made, ["internal/observer.ts"])
  })

  it.effect("a streamed run's hook finds the run's event sink, and its decisions are streamed", () =>
    Effect.gen(function*() {
      const found: Array<boolean> = []
      const audit = Middleware.make({
        name: "audit",
        wrapToolCall: (request, next) =>
          Effect.flatMap(Middleware.eventSink, (sink) => {
            found.push(sink !== undefined)
            return Effect.zipRight(Middleware.report(`running ${request.call.name}`), next(request))
          })
      })
      const agent = yield* Agent.make({ toolkit: Calculator, middleware: [audit] })
      const events = Chunk.toReadonlyArray(yield* Stream.runCollect(agent.stream("Add", { threadId: "t" })))
      assert.deepStrictEqual(decisionsOf(events), ["audit/wrapToolCall: running add"])
      assert.deepStrictEqual(found, [true])
      // a run nobody watches has no sink, and reporting costs it nothing
      yield* agent.run("Add", { threadId: "u" })
      assert.deepStrictEqual(found, [true, false])
    }).pipe(
      Effect.provide(Layer.merge(
        ScriptedModel.layer([
          ScriptedModel.toolCalls([{ name: "add", params: { a: 1, b: 2 }, id: "c1" }]),
          ScriptedModel.text("3"),
          ScriptedModel.toolCalls([{ name: "add", params: { a: 1, b: 2 }, id: "c2" }]),
          ScriptedModel.text("3")
        ]),
        CalculatorLive
      ))
    ))

  it.effect("a journal that runs each step on a runtime of its own still streams what the step's hooks report", () =>
    Effect.gen(function*() {
      // captured before any run: it holds no run's event sink and no running hook
      const elsewhere = yield* Effect.runtime<never>()
      const journal = RunJournal.RunJournal.of({
        ...RunJournal.inProcess,
        step: (_key, effect) => Effect.promise(() => Runtime.runPromise(elsewhere)(effect as Effect.Effect<any>))
      })
      const found: Array<boolean> = []
      const audit = Middleware.make({
        name: "audit",
        wrapToolCall: (request, next) =>
          Effect.flatMap(Middleware.eventSink, (sink) => {
            found.push(sink !== undefined)
            return Effect.zipRight(Middleware.report(`running ${request.call.name}`), next(request))
          })
      })
      const agent = yield* Agent.make({ toolkit: Calculator, middleware: [audit] })
      const events = Chunk.toReadonlyArray(
        yield* Stream.runCollect(agent.stream("Add", { threadId: "t" })).pipe(
          Effect.provideService(RunJournal.RunJournal, journal)
        )
      )
      assert.deepStrictEqual(decisionsOf(events), ["audit/wrapToolCall: running add"])
      assert.deepStrictEqual(found, [true])
    }).pipe(
      Effect.provide(Layer.merge(
        ScriptedModel.layer([
          ScriptedModel.toolCalls([{ name: "add", params: { a: 1, b: 2 }, id: "c1" }]),
          ScriptedModel.text("3")
        ]),
        CalculatorLive
      ))
    ))
})
