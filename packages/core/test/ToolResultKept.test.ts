import type { Prompt } from "@effect/ai"
import { Tool, Toolkit } from "@effect/ai"
import { FileSystem } from "@effect/platform"
import { NodeContext } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import { Agent, Checkpointer, Fork, Middleware, RunRecord, Secrets } from "@stepwise-agent/core"
import { ScriptedModel } from "@stepwise-agent/testing"
import { Effect, Either, FastCheck, Layer, Option, Schema, Stream } from "effect"
import * as os from "node:os"
import { isDeepStrictEqual } from "node:util"
import * as JsonDepth from "../src/internal/jsonDepth.js"
import * as JsonValue from "../src/internal/jsonValue.js"
import * as ToolResult from "../src/internal/toolResult.js"
import { Calculator, CalculatorLive } from "./utils.js"

// no provider's shape: only the registry knows it is a key
const key = "Zx9qWv3LmN7pRt2YbK5sHj8dFg4"

/** `leaf` inside `depth` arrays (`[[[…leaf…]]]`), built without recursion. */
const nested = (depth: number, leaf: unknown = `holding ${key}`): unknown => {
  let value: unknown = leaf
  for (let i = 0; i < depth; i++) value = [value]
  return value
}

/** `{ leaf }` shared twice at each of `depth` levels (`{ left: d, right: d }`): JSON writes 2^depth copies. */
const diamond = (depth: number): unknown => {
  let value: unknown = { leaf: key }
  for (let i = 0; i < depth; i++) value = { left: value, right: value }
  return value
}

/** An object that contains itself. */
const cyclic = (): unknown => {
  const value: { self?: unknown; note: string } = { note: key }
  value.self = value
  return value
}

/** An object whose toJSON gives an object holding it: JSON would call it again and again. */
const nestingToJson = (): unknown => {
  const value = { note: key, toJSON: (): unknown => ({ again: value }) }
  return value
}

/** An object with an enumerable getter that throws (JSON reads it). */
const throwingField = (): unknown =>
  Object.defineProperty({ note: key }, "boom", {
    enumerable: true,
    get: () => {
      throw new Error(`read ${key}`)
    }
  })

/** The values a tool or a hook may give that no store can keep, and what the model reads of each. */
const unkeepable: ReadonlyArray<readonly [string, () => unknown, string]> = [
  ["3,000 levels deep", () => nested(3_000), `more than ${JsonDepth.maxDepth} levels deep`],
  ["50,000 levels deep", () => nested(50_000), `more than ${JsonDepth.maxDepth} levels deep`],
  ["a cycle", cyclic, "contains itself (a cycle)"],
  ["a bigint", () => ({ total: 10n, note: key }), "holds a bigint"],
  ["a toJSON giving a bigint", () => ({ toJSON: () => 10n }), "holds a bigint"],
  ["a toJSON giving itself again, deeper", nestingToJson, "contains itself (a cycle)"],
  ["a field that throws when read", throwingField, "could not be read"]
]

const Give = Tool.make("give", { parameters: { which: Schema.Number }, success: Schema.Unknown })
const Refuse = Tool.make("refuse", {
  parameters: { which: Schema.Number },
  success: Schema.String,
  failure: Schema.Unknown
})
const Tools = Toolkit.make(Give, Refuse)
const ToolsLive = Tools.toLayer({
  give: ({ which }) => Effect.succeed(unkeepable[which]![1]()),
  refuse: ({ which }) => Effect.fail(unkeepable[which]![1]())
})

const tempDirectory = Effect.flatMap(
  FileSystem.FileSystem,
  (fs) => fs.makeTempDirectoryScoped({ directory: os.tmpdir(), prefix: "stepwise-kept-" })
)

/** The checkpointers a run saves its results to: in memory, and as JSON files in a fresh folder. */
const stores = {
  memory: Effect.succeed(Checkpointer.layerMemory),
  "file system": Effect.map(
    tempDirectory,
    (directory) => Checkpointer.layerFileSystem(directory).pipe(Layer.provide(NodeContext.layer))
  )
}

/** The tool result parts of `messages`. */
const resultsOf = (messages: ReadonlyArray<Prompt.Message>): Array<Prompt.ToolResultPart> =>
  messages.flatMap((message) =>
    message.role === "tool" ? message.content.filter((part) => part.type === "tool-result") : []
  )

/** Runs `tool` (which gives value `which`) on thread "t1" with `middleware`, then reads the stored thread back. */
const runAndLoad = (
  store: Layer.Layer<Checkpointer.Checkpointer, unknown>,
  call: { readonly name: string; readonly which: number },
  middleware: ReadonlyArray<Middleware.Any> = []
) =>
  Effect.gen(function*() {
    const agent = yield* Agent.make({ toolkit: Tools, middleware })
    const result = yield* agent.run("go", { threadId: "t1" })
    const checkpointer = yield* Checkpointer.Checkpointer
    const stored = yield* checkpointer.load("t1")
    return { result, stored, requests: yield* ScriptedModel.requests }
  }).pipe(
    Effect.provide(Layer.mergeAll(
      ScriptedModel.layer([
        ScriptedModel.toolCalls([{ name: call.name, params: { which: call.which }, id: "c1" }]),
        ScriptedModel.text("done")
      ]),
      ToolsLive,
      store
    ))
  )

/** The run completed, and the model, the thread and the store read a failed result saying `says`, without the key. */
const assertRefused = (
  outcome: Effect.Effect.Success<ReturnType<typeof runAndLoad>>,
  says: string
) => {
  const { requests, result, stored } = outcome
  assert.strictEqual(result._tag, "Completed")
  const [part] = resultsOf(result.state.messages)
  assert.isTrue(part!.isFailure)
  assert.include(JSON.stringify(part!.result), says)
  assert.include(JSON.stringify(requests[1]!.prompt), says)
  const text = JSON.stringify(Option.getOrThrow(stored))
  assert.include(text, says)
  assert.notInclude(text, key)
}

describe("Tool results: a value no store can keep becomes a failed result the model reads, never a crash", () => {
  for (const [storeName, makeStore] of Object.entries(stores)) {
    for (const registered of [false, true]) {
      for (const [index, [what, , says]] of unkeepable.entries()) {
        for (const tool of ["give", "refuse"]) {
          it.scoped(
            `${tool === "give" ? "a tool's result" : "a tool's typed failure"} ${what}, ${
              registered ? "with" : "without"
            } a registered secret, saved ${storeName === "memory" ? "in memory" : "to files"}`,
            () =>
              Effect.gen(function*() {
                if (registered) yield* Secrets.register(key)
                const store = yield* makeStore
                assertRefused(yield* runAndLoad(store, { name: tool, which: index }), says)
              }).pipe(Effect.provide(NodeContext.layer)),
            30_000
          )
        }
      }
    }
  }

  /** A `wrapToolCall` hook answering every call itself with `value`. */
  const answering = (value: () => unknown, isFailure: boolean) =>
    Middleware.make({
      name: "answering",
      wrapToolCall: (request) => Effect.succeed(Middleware.toolResult(request.call, value(), { isFailure }))
    })

  for (const [what, value, says] of unkeepable) {
    for (const isFailure of [false, true]) {
      it.scoped(
        `a wrapToolCall hook's own ${isFailure ? "failed " : ""}result ${what}, saved to files`,
        () =>
          Effect.gen(function*() {
            yield* Secrets.register(key)
            const store = yield* stores["file system"]
            assertRefused(yield* runAndLoad(store, { name: "give", which: 0 }, [answering(value, isFailure)]), says)
          }).pipe(Effect.provide(NodeContext.layer)),
        30_000
      )
    }
  }

  for (const [what, value, says] of unkeepable) {
    it.scoped(
      `a beforeModel hook's message holding a tool result ${what}: InvalidHookResult naming it, saved to files`,
      () =>
        Effect.gen(function*() {
          const store = yield* stores["file system"]
          const rewrites = Middleware.make({
            name: "rewrites",
            beforeModel: (state) => {
              const last = state.messages.at(-1)
              if (last?.role !== "tool") return Effect.void
              const part = last.content[0]!
              return Effect.succeed({
                messages: [
                  ...state.messages.slice(0, -1),
                  { ...last, content: [{ ...part, result: value() }] }
                ]
              })
            }
          })
          const failed = yield* Effect.flip(runAndLoad(store, { name: "give", which: 0 }, [rewrites]))
          assert.strictEqual((failed as { readonly _tag?: string })._tag, "InvalidHookResult")
          assert.include(String((failed as { readonly reason?: string }).reason), says)
        }).pipe(Effect.provide(NodeContext.layer)),
      30_000
    )
  }

  it.scoped("a guard's answer 50,000 levels deep, with a registered secret", () =>
    Effect.gen(function*() {
      yield* Secrets.register(key)
      const guard = Middleware.make({
        name: "guard",
        wrapToolCall: (request, next) =>
          next(request).pipe(
            Middleware.guardToolCall((final) =>
              Effect.succeed(Option.some(Middleware.toolResult(final.call, nested(50_000), { isFailure: true })))
            )
          )
      })
      const store = yield* stores["file system"]
      assertRefused(yield* runAndLoad(store, { name: "give", which: 0 }, [guard]), "levels deep")
    }).pipe(Effect.provide(NodeContext.layer)), 30_000)

  it.scoped("a result at the limit is kept as it is, scrubbed; one level more is refused", () =>
    Effect.gen(function*() {
      yield* Secrets.register(key)
      const call = { id: "c1", name: "give" } as Prompt.ToolCallPart
      const at = ToolResult.make(call, nested(JsonDepth.maxDepth - 1, { note: key }))
      assert.isFalse(at.isFailure)
      assert.deepStrictEqual(at.result, nested(JsonDepth.maxDepth - 1, { note: Secrets.redacted }))
      const over = ToolResult.make(call, nested(JsonDepth.maxDepth, { note: key }))
      assert.isTrue(over.isFailure)
      assert.include(JSON.stringify(over.result), "levels deep")
    }))
})

describe("Secrets.scrubToolResult walks no deeper than the limit", () => {
  /** `leaf` at the end of a chain of `depth` maps, sets or errors (each holding the next). */
  const chain = (depth: number, link: (inner: unknown) => unknown): unknown => {
    let value: unknown = `holding ${key}`
    for (let i = 0; i < depth; i++) value = link(value)
    return value
  }
  const chains: ReadonlyArray<readonly [string, unknown]> = [
    ["arrays", nested(50_000)],
    ["maps", chain(50_000, (inner) => new Map([["next", inner]]))],
    ["sets", chain(50_000, (inner) => new Set([inner]))],
    ["error causes", chain(50_000, (inner) => new Error("wrapped", { cause: inner }))],
    ["hidden fields", chain(50_000, (inner) => Object.defineProperty({}, "next", { value: inner }))]
  ]

  for (const [what, value] of chains) {
    for (const isFailure of [false, true]) {
      it.scoped(`a ${isFailure ? "failed" : "successful"} result of ${what} 50,000 deep: a failure saying so`, () =>
        Effect.gen(function*() {
          yield* Secrets.register(key)
          const scrubbed = Secrets.scrubToolResult({ result: value, isFailure })
          // a success of maps, sets, errors or hidden fields holds no string the scrub reads (it walks plain JSON)
          if (!isFailure && what !== "arrays") return assert.strictEqual(scrubbed.result, value)
          assert.isTrue(scrubbed.isFailure)
          assert.include(JSON.stringify(scrubbed.result), "levels deep")
        }))
    }
  }

  it.scoped("an object the result holds twice is scrubbed in both places", () =>
    Effect.gen(function*() {
      yield* Secrets.register(key)
      const shared = { token: `was ${key}` }
      const scrubbed = Secrets.scrubToolResult({ result: { first: shared, second: [shared] }, isFailure: false })
      assert.notInclude(JSON.stringify(scrubbed.result), key)
    }))
})

describe("Fork: a ToolResult edit is checked and scrubbed as a tool's result", () => {
  const script: ReadonlyArray<ScriptedModel.Turn> = [
    ScriptedModel.toolCalls([{ id: "call_1", name: "add", params: { a: 2, b: 3 } }]),
    ScriptedModel.text("5")
  ]

  /** An agent that ran `script` on thread "src" (saved to `store`), then `body`. */
  const withSource = <A, E>(
    store: Layer.Layer<Checkpointer.Checkpointer, unknown>,
    body: (agent: Agent.Service<any, any>) => Effect.Effect<A, E, ScriptedModel.ScriptedModel>
  ) =>
    Effect.gen(function*() {
      const agent = yield* Agent.make({ toolkit: Calculator })
      yield* agent.run("What is 2 + 3?", { threadId: "src" })
      return yield* body(agent)
    }).pipe(
      Effect.provide(Layer.mergeAll(ScriptedModel.layer([...script, ScriptedModel.text("ok")]), CalculatorLive, store))
    )

  const badEdits: ReadonlyArray<readonly [string, Fork.Edit, string]> = [
    ...unkeepable.map(([what, value, says]) =>
      [what, { _tag: "ToolResult", callId: "call_1", result: value() }, says] as const
    ),
    [
      "a failure flag that is not a boolean",
      { _tag: "ToolResult", callId: "call_1", result: 1, isFailure: "yes" as unknown as boolean },
      "isFailure is not a boolean"
    ]
  ]

  for (const [storeName, makeStore] of Object.entries(stores)) {
    for (const [what, edit, says] of badEdits) {
      it.scoped(
        `an edit's result ${what} (${storeName}): ForkError InvalidToolResult, nothing written`,
        () =>
          Effect.gen(function*() {
            yield* Secrets.register(key)
            const store = yield* makeStore
            yield* withSource(store, (agent) =>
              Effect.gen(function*() {
                const forked = yield* Effect.either(agent.fork("src", { to: "f", at: 1, edit }))
                if (Either.isRight(forked)) return assert.fail("the fork started")
                const error = forked.left
                assert.instanceOf(error, Fork.ForkError)
                assert.strictEqual((error as Fork.ForkError).reason, "InvalidToolResult")
                assert.include((error as Fork.ForkError).detail, says)
                assert.isTrue(Option.isNone(yield* agent.thread("f")))
              }))
          }).pipe(Effect.provide(NodeContext.layer)),
        30_000
      )
    }
  }

  it.effect("an edit of a recorded run with a bigint: ForkError InvalidToolResult before anything runs", () =>
    Effect.gen(function*() {
      const { record } = yield* Effect.flatMap(
        Agent.make({ toolkit: Calculator }),
        (agent) => RunRecord.record(agent, "What is 2 + 3?", { threadId: "prod" })
      ).pipe(Effect.provide(Layer.merge(ScriptedModel.layer(script), CalculatorLive)))
      const edit: Fork.Edit = { _tag: "ToolResult", callId: "call_1", result: { total: 5n } }
      const checked = Fork.checkRecord(record, { to: "f", at: 1, edit })
      assert.isTrue(Either.isLeft(checked) && checked.left.reason === "InvalidToolResult")
      const forked = yield* Effect.flatMap(
        Agent.make({ toolkit: Calculator }),
        (agent) => Effect.either(agent.fork(record, { to: "f", at: 1, edit }))
      ).pipe(Effect.provide(Layer.merge(ScriptedModel.layer([ScriptedModel.text("ok")]), CalculatorLive)))
      assert.isTrue(Either.isLeft(forked) && (forked.left as Fork.ForkError).reason === "InvalidToolResult")
    }))

  it.scoped("an edit's result quoting a registered secret is stored and sent scrubbed", () =>
    Effect.gen(function*() {
      yield* Secrets.register(key)
      const store = yield* stores["file system"]
      yield* withSource(store, (agent) =>
        Effect.gen(function*() {
          const result = yield* agent.fork("src", {
            to: "f",
            at: 1,
            edit: { _tag: "ToolResult", callId: "call_1", result: { stdout: `KEY=${key}` } }
          })
          assert.strictEqual(result._tag, "Completed")
          const [request] = (yield* ScriptedModel.requests).slice(-1)
          assert.notInclude(JSON.stringify(request!.prompt), key)
          assert.notInclude(JSON.stringify(yield* agent.thread("f")), key)
          assert.include(JSON.stringify(yield* agent.thread("f")), `KEY=${Secrets.redacted}`)
        }))
    }).pipe(Effect.provide(NodeContext.layer)), 30_000)
})

describe("ToolResult.make: properties", () => {
  it.prop(
    "a JSON value within the limit is kept equal, a primitive as the same part (nothing registered)",
    [FastCheck.jsonValue({ maxDepth: 8 }), FastCheck.boolean()],
    ([value, isFailure]) => {
      const part = Middleware.toolResult({ id: "c", name: "t" } as Prompt.ToolCallPart, value, { isFailure })
      const kept = ToolResult.keep(part)
      return kept.isFailure === isFailure && isDeepStrictEqual(kept.result, JSON.parse(JSON.stringify(value))) &&
        (typeof value === "object" && value !== null || kept === part)
    }
  )

  it.prop(
    "any value is kept as JSON.parse(JSON.stringify(value)) when JSON writes it, else as a failed result",
    [
      FastCheck.anything({
        maxDepth: 4,
        withBigInt: true,
        withBoxedValues: true,
        withTypedArray: true,
        withDate: true,
        withMap: true,
        withSet: true,
        withSparseArray: true,
        withNullPrototype: true,
        withObjectString: true
      }),
      FastCheck.boolean()
    ],
    ([value, isFailure]) => {
      const kept = ToolResult.make({ id: "c", name: "t" } as Prompt.ToolCallPart, value, { isFailure })
      const written = Either.try(() => JSON.stringify(value))
      if (Either.isLeft(written)) return kept.isFailure && JSON.stringify(kept.result).includes("was not kept")
      const expected = written.right === undefined ? undefined : JSON.parse(written.right)
      return kept.isFailure === isFailure && isDeepStrictEqual(kept.result, expected)
    }
  )

  it.prop(
    "a value is refused for depth exactly when it nests past the limit, shared parts counted where they stand",
    [FastCheck.integer({ min: 1, max: 400 }), FastCheck.integer({ min: 0, max: 3 })],
    ([depth, shares]) => {
      // the same array held at several depths: its deepest place counts
      const inner = nested(depth)
      let value: unknown = inner
      for (let i = 0; i < shares; i++) value = [inner, value]
      return (JsonValue.problemOf(value) === "TooDeep") === (depth + shares > JsonDepth.maxDepth) &&
        (JsonValue.problemOf(value) === "TooDeep") === JsonDepth.exceeds(value)
    }
  )

  it("a value that shares each level twice (2^100 paths) is refused at once: too large as JSON writes it", () => {
    const started = Date.now()
    // the scrub's check (`problemOf`) still walks a shared part once per depth
    assert.strictEqual(JsonValue.problemOf(diamond(100)), undefined)
    assert.strictEqual(JsonValue.problemOf(diamond(100), { everyProperty: true }), undefined)
    assert.strictEqual(JsonValue.problemOf(diamond(200)), "TooDeep")
    // JSON writes every copy: 2^100 leaves are far past the values a kept result may hold
    assert.deepStrictEqual(JsonValue.snapshot(diamond(100)), { _tag: "Refused", problem: "TooLarge" })
    assert.isBelow(Date.now() - started, 5_000)
  })

  it.prop(
    "JsonValue finds a problem exactly when JSON.stringify throws or the value nests past the limit",
    [FastCheck.anything({ maxDepth: 4, withBigInt: true, withMap: true, withSet: true, withTypedArray: true })],
    ([value]) => {
      const throws = Either.isLeft(Either.try(() => JSON.stringify(value)))
      return (JsonValue.problemOf(value) !== undefined) === throws
    }
  )
})

/** A class whose instances JSON writes as their fields (the result of a tool that returns one). */
class Env {
  readonly stdout = `OPENAI_API_KEY=${key}`
}

/** Results that are not plain data, each of whose JSON holds the key: what is kept must be what JSON writes, scrubbed. */
const notPlain: ReadonlyArray<readonly [string, () => unknown]> = [
  ["a class instance", () => new Env()],
  ["a toJSON giving an object", () => ({ toJSON: () => ({ stdout: `KEY=${key}` }) })],
  ["a boxed string in an array", () => [new String(`KEY=${key}`)]],
  [
    "a boxed string with a plain object's prototype",
    () => ({ out: Object.setPrototypeOf(new String(key), Object.prototype) })
  ],
  ["a Date whose toJSON gives the key", () => ({ at: Object.assign(new Date(0), { toJSON: () => `at ${key}` }) })],
  ["a URL holding the key", () => ({ link: new URL(`https://example.com/?token=${key}`) })],
  ["a getter that answers the key on later reads", () => {
    let reads = 0
    return {
      get stdout() {
        return ++reads > 1 ? `KEY=${key}` : "ok"
      }
    }
  }],
  ["a map, whose JSON is {}, next to the key", () => ({ env: new Map([["KEY", key]]), note: `KEY=${key}` })]
]

describe("Tool results: what is kept is what JSON writes, scrubbed", () => {
  const Env_ = Tool.make("env", { parameters: { which: Schema.Number }, success: Schema.Unknown })
  const Fail = Tool.make("envFail", {
    parameters: { which: Schema.Number },
    success: Schema.String,
    failure: Schema.Unknown
  })
  const EnvTools = Toolkit.make(Env_, Fail)
  const EnvToolsLive = EnvTools.toLayer({
    env: ({ which }) => Effect.succeed(notPlain[which]![1]()),
    envFail: ({ which }) => Effect.fail(notPlain[which]![1]())
  })

  for (const [index, [what, value]] of notPlain.entries()) {
    for (const name of ["env", "envFail"]) {
      it.effect(
        `${name === "env" ? "a result" : "a typed failure"} of ${what}: the key reaches no event, thread or request`,
        () =>
          Effect.gen(function*() {
            yield* Secrets.register(key)
            const agent = yield* Agent.make({ toolkit: EnvTools })
            const events = yield* Stream.runCollect(agent.stream("go", { threadId: "t1" }))
            const stored = yield* Effect.flatMap(Checkpointer.Checkpointer, (checkpointer) => checkpointer.load("t1"))
            const requests = yield* ScriptedModel.requests
            // the stored messages are encoded: a tool result's is its JSON
            const [part] = resultsOf(Option.getOrThrow(stored).messages as ReadonlyArray<Prompt.Message>)
            const written = { result: JSON.parse(JSON.stringify(value())), isFailure: name === "envFail" }
            assert.deepStrictEqual(part!.result, Secrets.scrubToolResult(written).result)
            for (
              const text of [
                JSON.stringify([...events]),
                JSON.stringify(Option.getOrThrow(stored)),
                JSON.stringify(requests[1]!.prompt)
              ]
            ) {
              assert.notInclude(text, key)
            }
          }).pipe(
            Effect.scoped,
            Effect.provide(Layer.mergeAll(
              ScriptedModel.layer([
                ScriptedModel.toolCalls([{ name, params: { which: index }, id: "c1" }]),
                ScriptedModel.text("done")
              ]),
              EnvToolsLive,
              Checkpointer.layerMemory
            ))
          ),
        30_000
      )
    }
  }

  it("each field and toJSON is read once, and the kept result is plain data", () => {
    let reads = 0
    let calls = 0
    const value = {
      get count() {
        return ++reads
      },
      inner: { toJSON: (key: string) => ({ called: ++calls, key }) }
    }
    const kept = ToolResult.make({ id: "c", name: "t" } as Prompt.ToolCallPart, value)
    assert.deepStrictEqual(kept.result, { count: 1, inner: { called: 1, key: "inner" } })
    assert.strictEqual(reads, 1)
    assert.strictEqual(calls, 1)
    assert.strictEqual(Object.getPrototypeOf(kept.result), Object.prototype)
    assert.isUndefined(Object.getOwnPropertyDescriptor(kept.result, "count")!.get)
  })

  it("JSON's rules: holes and non-finite numbers null, functions, symbols and undefined left out, -0 written 0", () => {
    const sparse: Array<unknown> = [1]
    sparse[3] = () => 1
    const value = {
      sparse,
      numbers: [NaN, Infinity, -0, new Number(2)],
      gone: undefined,
      fn: () => 1,
      sym: Symbol("s"),
      [Symbol("k")]: key,
      flag: new Boolean(false),
      ["__proto__"]: 1
    }
    Object.defineProperty(value, "hidden", { value: key, enumerable: false })
    const kept = ToolResult.make({ id: "c", name: "t" } as Prompt.ToolCallPart, value)
    assert.deepStrictEqual(kept.result, JSON.parse(JSON.stringify(value)))
    assert.notInclude(JSON.stringify(kept.result), key)
  })

  it("a toJSON's value that has its own toJSON: JSON calls only the outer, so its bigint field is refused", () => {
    const kept = ToolResult.make(
      { id: "c", name: "t" } as Prompt.ToolCallPart,
      { toJSON: () => ({ toJSON: () => "fine", big: 10n }) }
    )
    assert.isTrue(kept.isFailure)
    assert.include(JSON.stringify(kept.result), "holds a bigint")
  })

  const tooLarge: ReadonlyArray<readonly [string, () => unknown]> = [
    ["an object shared twice at each of 28 levels", () => diamond(28)],
    ["a sparse array of 2^26 items", () => {
      const items: Array<number> = []
      items[2 ** 26] = 1
      return items
    }],
    ["a sparse array of 2^32 - 1 items", () => {
      const items: Array<number> = []
      items[2 ** 32 - 2] = 1
      return { items }
    }],
    ["an object of 1,000,000 fields", () => {
      const fields: Record<string, string> = {}
      for (let i = 0; i < 1_000_000; i++) fields[`k${i}`] = key
      return fields
    }],
    ["1,000,000 functions (left out, but read)", () =>
      Array.from({ length: 1_000 }, () => {
        const fields: Record<string, unknown> = {}
        for (let i = 0; i < 1_000; i++) fields[`f${i}`] = () => key
        return fields
      })]
  ]

  for (const [what, value] of tooLarge) {
    for (const isFailure of [false, true]) {
      it.effect(
        `${isFailure ? "a failed" : "a"} result of ${what}: refused as too large, quickly`,
        () =>
          Effect.gen(function*() {
            yield* Secrets.register(key)
            const made = value()
            const started = Date.now()
            const kept = ToolResult.make({ id: "c", name: "t" } as Prompt.ToolCallPart, made, { isFailure })
            // well under a second alone; the bound leaves room for a loaded machine (before the limits: 43 s, or a crash)
            assert.isBelow(Date.now() - started, 10_000)
            assert.isTrue(kept.isFailure)
            assert.include(JSON.stringify(kept.result), "too large")
            assert.notInclude(JSON.stringify(kept.result), key)
          }).pipe(Effect.scoped),
        30_000
      )
    }
  }

  it("a result of exactly the budget's values is kept; one more is refused", () => {
    const at = Array.from({ length: JsonValue.maxValues - 1 }, () => 0)
    assert.isFalse(ToolResult.make({ id: "c", name: "t" } as Prompt.ToolCallPart, at).isFailure)
    assert.isTrue(ToolResult.make({ id: "c", name: "t" } as Prompt.ToolCallPart, [...at, 0]).isFailure)
  })
})
