import { assert, describe, it } from "@effect/vitest"
import { Agent, Checkpointer, Middleware, Secrets } from "@stepwise-agent/core"
import { ScriptedModel } from "@stepwise-agent/testing"
import { Deferred, Effect, Fiber, Layer, Option, Schema } from "effect"

const Question = Schema.Struct({ question: Schema.String })
const Approve = Schema.Struct({ approve: Schema.Boolean })

/**
 * Asks `request` once before the first model call, waiting on `decision` (and `check`); keeps every decision
 * the hook is resumed with in `seen`.
 */
const asking = <D, I>(options: {
  readonly decision: Schema.Schema<D, I>
  readonly seen: Array<unknown>
  readonly request?: Schema.Schema<any, any>
  readonly ask?: unknown
  readonly check?: (answer: { readonly decision: D }) => Effect.Effect<void>
}) =>
  Middleware.make({
    name: "ask",
    wait: {
      request: options.request ?? Question,
      decision: options.decision,
      ...(options.check === undefined ? {} : { check: options.check })
    },
    beforeModel: ({ resume, step }) =>
      Effect.sync(() => {
        if (Option.isSome(resume)) {
          options.seen.push(resume.value)
          return undefined
        }
        return step === 0 ? { interrupt: (options.ask ?? { question: "Go on?" }) as never } : undefined
      })
  })

const models = () => ScriptedModel.layer([ScriptedModel.text("done")])
const provide = Effect.provide(Layer.merge(models(), Checkpointer.layerMemory))

const nested = (levels: number, wrap: (inner: unknown) => unknown) => {
  let value: unknown = true
  for (let i = 0; i < levels; i++) value = wrap(value)
  return value
}

const cyclic: Record<string, unknown> = { a: 1 }
cyclic.self = cyclic

/** Values whose reading throws, or too deep for a recursive formatter or parser. */
const unreadable = (): ReadonlyArray<readonly [string, unknown]> => [
  ["a getter that throws", {
    get approve(): boolean {
      throw new Error("getter boom")
    }
  }],
  [
    "a proxy whose traps throw",
    new Proxy({}, {
      get: () => {
        throw new Error("get boom")
      },
      has: () => {
        throw new Error("has boom")
      },
      ownKeys: () => {
        throw new Error("ownKeys boom")
      },
      getOwnPropertyDescriptor: () => {
        throw new Error("descriptor boom")
      }
    })
  ],
  ["an object nested 100k levels", { approve: nested(100_000, (d) => ({ d })) }],
  ["an array nested 100k levels", { approve: nested(100_000, (d) => [d]) }]
]

/** Values that are not JSON, or are shaped to trip an object's prototype. */
const hostile = (): ReadonlyArray<readonly [string, unknown]> => [
  ["cyclic", { approve: cyclic }],
  ["a BigInt", { approve: 1n }],
  ["a function", { approve: () => true }],
  ["a symbol", { approve: Symbol("yes") }],
  ["a __proto__ key", JSON.parse(`{"__proto__": {"approve": true}}`)],
  ["a constructor key", { constructor: { approve: true } }],
  ["a null-prototype object of the wrong shape", Object.assign(Object.create(null), { approve: "yes" })]
]

describe("typed waits against hostile input", () => {
  it.effect(
    "a resume value whose reading throws, or nested too deep to describe, fails with InvalidResume; the thread waits unchanged",
    () =>
      Effect.gen(function*() {
        const seen: Array<unknown> = []
        const agent = yield* Agent.make({ middleware: [asking({ decision: Approve, seen })] })
        yield* agent.run("hi", { threadId: "t" })
        const before = yield* agent.thread("t")
        for (const [label, value] of [...unreadable(), ...hostile()]) {
          for (
            const error of [
              yield* Effect.flip(agent.resume("t", value as never)),
              yield* Effect.flip(agent.validateResume("t", value as never))
            ]
          ) {
            assert.strictEqual(error._tag, "InvalidResume", label)
            assert.include(error.message, `the decision for middleware "ask" is invalid`, label)
          }
        }
        assert.deepStrictEqual(seen, [])
        assert.deepStrictEqual(yield* agent.thread("t"), before)
        assert.strictEqual((yield* agent.resume("t", { approve: true }))._tag, "Completed")
        assert.deepStrictEqual(seen, [{ approve: true }])
      }).pipe(provide),
    120_000
  )

  it.effect(
    "a huge refused value (a 50 MB string, a million-element array) is described in a bounded reason",
    () =>
      Effect.gen(function*() {
        const agent = yield* Agent.make({ middleware: [asking({ decision: Approve, seen: [] })] })
        yield* agent.run("hi", { threadId: "t" })
        const before = yield* agent.thread("t")
        for (
          const value of [{ approve: "x".repeat(50_000_000) }, { approve: Array.from({ length: 1_000_000 }, () => 1) }]
        ) {
          const started = Date.now()
          const error = yield* Effect.flip(agent.resume("t", value as never))
          assert.strictEqual(error._tag, "InvalidResume")
          assert.isBelow(error.message.length, 5_000)
          assert.include(error.message, `expected boolean, got`)
          // generous: quoting and scrubbing the whole value took about 30 s
          assert.isBelow(Date.now() - started, 10_000)
        }
        assert.deepStrictEqual(yield* agent.thread("t"), before)
      }).pipe(provide),
    120_000
  )

  it.effect(
    "a request whose reading throws, or nested too deep to describe, fails the run with InvalidHookResult; the thread is not left waiting",
    () =>
      Effect.gen(function*() {
        const checkpointer = yield* Checkpointer.Checkpointer
        const requests: ReadonlyArray<unknown> = [
          ...unreadable().map(([, value]) => ({ question: value })),
          { question: cyclic },
          { question: 1n }
        ]
        for (const [i, ask] of requests.entries()) {
          const agent = yield* Agent.make({ middleware: [asking({ decision: Approve, seen: [], ask })] })
          const error = yield* Effect.flip(agent.run("hi", { threadId: `t${i}` }))
          assert.strictEqual(error._tag, "InvalidHookResult")
          assert.include(error.message, `interrupted with a request its wait's request schema refuses`)
          const stored = yield* checkpointer.load(`t${i}`)
          assert.isTrue(Option.isNone(stored) || stored.value.pending === undefined)
        }
      }).pipe(provide),
    120_000
  )

  it.effect(
    "a request that does not encode as JSON fails the run with InvalidHookResult; one that does is stored as JSON keeps it, in memory too",
    () =>
      Effect.gen(function*() {
        const checkpointer = yield* Checkpointer.Checkpointer
        const requests: ReadonlyArray<unknown> = [{ n: 1n }, cyclic, nested(100_000, (d) => ({ d }))]
        for (const [i, ask] of requests.entries()) {
          const agent = yield* Agent.make({
            middleware: [asking({ decision: Approve, seen: [], request: Schema.Unknown, ask })]
          })
          const error = yield* Effect.flip(agent.run("hi", { threadId: `t${i}` }))
          assert.strictEqual(error._tag, "InvalidHookResult")
          assert.include(error.message, `interrupted with a request that does not encode as JSON`)
          const stored = yield* checkpointer.load(`t${i}`)
          assert.isTrue(Option.isNone(stored) || stored.value.pending === undefined)
        }
        const at = new Date("2026-12-06T10:00:00.000Z")
        const agent = yield* Agent.make({
          middleware: [asking({ decision: Approve, seen: [], request: Schema.Unknown, ask: { at, drop: () => 1 } })]
        })
        const result = yield* agent.run("hi", { threadId: "json" })
        assert.strictEqual(result._tag === "Interrupted" ? result.interrupt.value.at : undefined, at)
        const stored = yield* checkpointer.load("json")
        assert.deepStrictEqual(
          Option.map(stored, (checkpoint) => checkpoint.pending?.value),
          Option.some({ at: at.toISOString() })
        )
      }).pipe(provide),
    120_000
  )

  it.effect("a stored request the agent's schema refuses: agent.thread's CheckpointError scrubs the credentials it quotes", () =>
    Effect.gen(function*() {
      const key = "sk-abcdefghijklmnopqrstuvwxyz0123456789"
      const first = yield* Agent.make({ middleware: [asking({ decision: Approve, seen: [], ask: { question: key } })] })
      yield* first.run("hi", { threadId: "t" })
      const stricter = yield* Agent.make({
        middleware: [asking({ decision: Approve, seen: [], request: Schema.Struct({ question: Schema.Number }) })]
      })
      const error = yield* Effect.flip(stricter.thread("t"))
      assert.strictEqual(error._tag, "CheckpointError")
      assert.include(error.message, "does not decode with its wait's request schema")
      assert.notInclude(error.message, key)
    }).pipe(provide))

  it.effect("credentials a refused decision quotes are scrubbed from validateResume's error as from resume's", () =>
    Effect.gen(function*() {
      const agent = yield* Agent.make({ middleware: [asking({ decision: Approve, seen: [] })] })
      yield* agent.run("hi", { threadId: "t" })
      for (
        const value of [{ approve: "registered-credential-0123" }, { approve: { apiKey: "named-credential-4567" } }]
      ) {
        for (
          const error of [
            yield* Effect.flip(agent.validateResume("t", value as never)),
            yield* Effect.flip(agent.resume("t", value as never))
          ]
        ) {
          assert.strictEqual(error._tag, "InvalidResume")
          assert.notInclude(error.message, "registered-credential-0123")
          assert.notInclude(error.message, "named-credential-4567")
          assert.include(error.message, Secrets.redacted)
        }
      }
    }).pipe(provide, Effect.provide(Secrets.layer("registered-credential-0123"))))

  it.effect("a check that never ends: the interrupted resume leaves the thread waiting unchanged, and a later resume goes on", () =>
    Effect.gen(function*() {
      const seen: Array<unknown> = []
      const started = yield* Deferred.make<void>()
      const agent = yield* Agent.make({
        middleware: [asking({
          decision: Approve,
          seen,
          // an approval's check never ends; a refusal's dies
          check: ({ decision }) =>
            decision.approve
              ? Effect.zipRight(Deferred.succeed(started, undefined), Effect.never)
              : Effect.die("check died")
        })]
      })
      yield* agent.run("hi", { threadId: "t" })
      const before = yield* agent.thread("t")
      const fiber = yield* Effect.fork(agent.resume("t", { approve: true }))
      yield* Deferred.await(started)
      yield* Fiber.interrupt(fiber)
      assert.deepStrictEqual(yield* agent.thread("t"), before)
      const died = yield* Effect.exit(agent.resume("t", { approve: false }))
      assert.strictEqual(died._tag, "Failure")
      assert.deepStrictEqual(yield* agent.thread("t"), before)
      assert.deepStrictEqual(seen, [])
    }).pipe(provide))

  it.effect("concurrent resumes of one thread with different decisions: one reaches the hook, the other finds nothing to resume", () =>
    Effect.gen(function*() {
      const seen: Array<unknown> = []
      const agent = yield* Agent.make({ middleware: [asking({ decision: Approve, seen })] })
      yield* agent.run("hi", { threadId: "t" })
      const results = yield* Effect.all(
        [Effect.either(agent.resume("t", { approve: true })), Effect.either(agent.resume("t", { approve: false }))],
        { concurrency: "unbounded" }
      )
      assert.strictEqual(results.filter((result) => result._tag === "Right").length, 1)
      const refused = results.find((result) => result._tag === "Left")
      assert.strictEqual(refused?._tag === "Left" ? refused.left._tag : undefined, "ThreadStateError")
      assert.strictEqual(seen.length, 1)
    }).pipe(provide))

  it.effect("a fresh agent on the same checkpointer takes a decision of a class or a number read from a string, decoded", () =>
    Effect.gen(function*() {
      class Approval
        extends Schema.Class<Approval>("Approval")({ approve: Schema.Boolean, until: Schema.DateFromString })
      {}
      const until = new Date("2026-12-07T00:00:00.000Z")
      const cases: ReadonlyArray<readonly [Schema.Schema<any, any>, unknown, (seen: unknown) => void]> = [
        [Approval, new Approval({ approve: true, until }), (seen) => {
          assert.isTrue(seen instanceof Approval)
          assert.strictEqual((seen as Approval).until.toISOString(), until.toISOString())
        }],
        [Schema.NumberFromString, 42, (seen) => assert.strictEqual(seen, 42)]
      ]
      for (const [decision, value, check] of cases) {
        const first = yield* Agent.make({ middleware: [asking({ decision, seen: [] })] })
        yield* first.run("hi", { threadId: "t" })
        const seen: Array<unknown> = []
        const fresh = yield* Agent.make({ middleware: [asking({ decision, seen })] })
        assert.strictEqual((yield* fresh.resume("t", value))._tag, "Completed")
        assert.strictEqual(seen.length, 1)
        check(seen[0])
        yield* (yield* Checkpointer.Checkpointer).delete("t")
      }
    }).pipe(
      Effect.provide(
        Layer.merge(ScriptedModel.layer([ScriptedModel.text("a"), ScriptedModel.text("b")]), Checkpointer.layerMemory)
      )
    ))
})
