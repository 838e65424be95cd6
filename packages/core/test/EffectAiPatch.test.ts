/**
 * The patch this repository applies to @effect/ai 0.37 (patches/, applied by
 * `npm ci` through patch-package): the response schema is built once per
 * tool set instead of on every model call, and `streamText` is built with
 * channel operations instead of the `Stream.unwrapScoped` and
 * `Stream.provideService` stages, which each ran a stream of streams. These
 * tests fail when the patch is missing, check that the cache keeps tool sets
 * apart, run the agent on an unpatched copy of `LanguageModel` to show it does
 * not depend on it, and compare the patched `streamText` with the unpatched
 * one on the same provider streams: the same parts, errors, ids, spans and
 * finalizers.
 */
import { AiError, IdGenerator, LanguageModel, Prompt, Response, Tool, Toolkit } from "@effect/ai"
import { assert, describe, it } from "@effect/vitest"
import { Agent } from "@stepwise-agent/core"
import { Cause, Chunk, Effect, Exit, FastCheck, Logger, Option, Schema, Stream, Tracer } from "effect"
import * as fs from "node:fs"
import { createRequire } from "node:module"
import * as path from "node:path"
import { pathToFileURL } from "node:url"
import * as EffectAiPatch from "../src/internal/effectAiPatch.js"
import { Calculator, CalculatorLive } from "./utils.js"

const require = createRequire(import.meta.url)
const aiRoot = path.dirname(path.dirname(path.dirname(require.resolve("@effect/ai"))))
const installed = (file: string) => fs.readFileSync(path.join(aiRoot, "dist", file, "LanguageModel.js"), "utf8")

/** The calls the patch replaces, and what replaces them. */
const replaced: ReadonlyArray<readonly [original: string, patched: string]> = [
  ["Schema.mutable(Schema.Array(Response.Part(Toolkit.empty)))", "partsSchemaFor(Toolkit.empty)"],
  ["Schema.mutable(Schema.Array(Response.Part(toolkit)))", "partsSchemaFor(toolkit)"],
  ["Schema.ChunkFromSelf(Response.StreamPart(Toolkit.empty))", "streamChunkSchemaFor(Toolkit.empty)"],
  ["Schema.ChunkFromSelf(Response.StreamPart(toolkit))", "streamChunkSchemaFor(toolkit)"],
  ["Schema.Array(Response.StreamPart(toolkit))", "streamPartsSchemaFor(toolkit)"]
]

/** The stages of `streamText` the patch replaces, and what replaces them (in both builds' spelling). */
const streamStages: ReadonlyArray<readonly [original: string, patched: string]> = [
  [
    "}, Stream.unwrapScoped, Stream.mapError(",
    "}, effect => Stream.fromChannel(unwrapScopedChannel(effect, IdGenerator, idGenerator)), Stream.mapError("
  ],
  [
    "}, Stream.unwrapScoped, Stream.mapError(",
    "}, effect => Stream.fromChannel(unwrapScopedChannel(effect, _IdGenerator.IdGenerator, idGenerator)), Stream.mapError("
  ],
  ["}) : error), Stream.provideService(IdGenerator, idGenerator));", "}) : error));"]
]

/** `LanguageModel` as published: a copy of the installed ES module build with the patch's replacements undone. */
let unpatched: Promise<typeof LanguageModel> | undefined
const loadUnpatched = Effect.promise(() => unpatched ??= copyUnpatched())
const copyUnpatched = async (): Promise<typeof LanguageModel> => {
  // inside node_modules so that its imports resolve
  const copy = path.join(aiRoot, "..", "..", ".cache", "stepwise-unpatched-ai")
  fs.rmSync(copy, { recursive: true, force: true })
  fs.cpSync(path.join(aiRoot, "dist", "esm"), copy, { recursive: true })
  let source = fs.readFileSync(path.join(copy, "LanguageModel.js"), "utf8")
  for (const [original, patched] of [...replaced, ...streamStages]) source = source.split(patched).join(original)
  fs.writeFileSync(path.join(copy, "LanguageModel.js"), source)
  return import(pathToFileURL(path.join(copy, "LanguageModel.js")).href)
}

const fakeModel = (name: string) =>
  LanguageModel.make({
    generateText: () =>
      Effect.succeed([
        { type: "tool-call", id: "c1", name, params: {} },
        { type: "finish", reason: "tool-calls", usage: { inputTokens: 1, outputTokens: 1, totalTokens: 2 } }
      ]),
    streamText: () => Effect.dieMessage("not streamed") as never
  })

describe("the @effect/ai response-schema patch", () => {
  it("is applied to the installed ES module and CommonJS builds", () => {
    for (const build of ["esm", "cjs"]) {
      const source = installed(build)
      for (const [original, patched] of replaced) {
        assert.isFalse(source.includes(`= ${original}`), `${build}: ${original} is still built per call`)
        assert.isTrue(source.includes(`= ${patched}`), `${build}: ${patched} is missing`)
      }
      assert.isTrue(
        streamStages.slice(0, 2).some(([, patched]) => source.includes(patched)),
        `${build}: streamText still runs Stream.unwrapScoped`
      )
      assert.isFalse(
        /Stream\.provideService\((_IdGenerator\.)?IdGenerator, idGenerator\)/.test(source),
        `${build}: streamText still runs Stream.provideService`
      )
    }
  })

  it.effect("keeps the schemas of different tool sets apart", () =>
    Effect.gen(function*() {
      const A = Toolkit.make(Tool.make("a"))
      const B = Toolkit.make(Tool.make("b", { parameters: { n: Schema.optional(Schema.Number) } }))
      const handled = (kit: typeof A | typeof B) => ({ tools: kit.tools, handle: () => Effect.die("unused") }) as any
      const callsA = yield* fakeModel("a")
      const callsB = yield* fakeModel("b")
      for (let i = 0; i < 2; i++) {
        const a = yield* callsA.generateText({ prompt: "x", toolkit: handled(A), disableToolCallResolution: true })
        assert.deepStrictEqual(a.toolCalls.map((call: { readonly name: string }) => call.name), ["a"])
        const b = yield* callsB.generateText({ prompt: "x", toolkit: handled(B), disableToolCallResolution: true })
        assert.deepStrictEqual(b.toolCalls.map((call: { readonly name: string }) => call.name), ["b"])
        const wrong = yield* Effect.flip(
          callsA.generateText({ prompt: "x", toolkit: handled(B), disableToolCallResolution: true })
        )
        assert.strictEqual(wrong._tag, "MalformedOutput")
      }
    }))

  it.effect("is not needed for correctness: the agent runs on an unpatched LanguageModel", () =>
    Effect.gen(function*() {
      const Unpatched = yield* loadUnpatched
      assert.notStrictEqual(Unpatched.make, LanguageModel.make)

      // A provider returning encoded parts, built with the unpatched LanguageModel.make.
      const raw: Array<ReadonlyArray<unknown>> = [
        [
          { type: "tool-call", id: "c1", name: "add", params: { a: 2, b: 3 } },
          { type: "tool-call", id: "c2", name: "nope", params: {} },
          { type: "finish", reason: "tool-calls", usage: { inputTokens: 1, outputTokens: 1, totalTokens: 2 } }
        ],
        [{ type: "text", text: "5" }, {
          type: "finish",
          reason: "stop",
          usage: { inputTokens: 1, outputTokens: 1, totalTokens: 2 }
        }]
      ]
      let turn = 0
      const model = yield* Unpatched.make({
        generateText: () => Effect.succeed([...raw[turn++]!] as any),
        streamText: () => Effect.dieMessage("not streamed") as never
      })
      const agent = yield* Agent.make({ toolkit: Calculator }).pipe(
        Effect.provideService(LanguageModel.LanguageModel, model)
      )
      const result = yield* agent.run("2 + 3?", { threadId: "unpatched" })
      assert.strictEqual(result._tag, "Completed")
      if (result._tag !== "Completed") return
      assert.strictEqual(result.text, "5")
      const results = result.state.messages.flatMap((message) => message.role === "tool" ? message.content : [])
      assert.deepStrictEqual(results.map((part) => [part.id, part.isFailure]), [["c1", false], ["c2", true]])
    }).pipe(Effect.provide(CalculatorLive)))

  it("is seen by the agent: the installed build exports the patch's marker", () => {
    assert.isTrue(EffectAiPatch.isPatched)
  })

  it.effect("unpatched, an agent with more than 3 tools logs one warning per process: the cost and the fix", () =>
    Effect.gen(function*() {
      const logs: Array<string> = []
      const capture = Logger.replace(
        Logger.defaultLogger,
        Logger.make(({ logLevel, message }) => logs.push(`${logLevel.label} ${String(message)}`))
      )
      const warn = (tools: number, patched: boolean) =>
        EffectAiPatch.warnIfUnpatched(tools, patched).pipe(Effect.provide(capture))
      yield* warn(12, true)
      yield* warn(3, false)
      assert.deepStrictEqual(logs, [])
      yield* warn(12, false)
      yield* warn(12, false)
      assert.strictEqual(logs.length, 1)
      assert.match(logs[0]!, /^WARN @effect\/ai 0\.37\.0 is not patched/)
      assert.include(logs[0]!, "12 tools: ~12 ms per call")
      assert.include(logs[0]!, "@stepwise-agent/core/assets/patches/README.md")
    }))
})

/** What a drained `streamText` gave: its parts as JSON, how it ended, the spans it ended, the finalizers run. */
interface Observed {
  readonly parts: ReadonlyArray<string>
  readonly exit: string
  readonly spans: ReadonlyArray<string>
  readonly finalized: number
}

const usage = { inputTokens: 1, outputTokens: 1, totalTokens: 2 }

/**
 * A provider streaming `deltas` as text deltas (each part's id from the
 * `IdGenerator` the model provides), then a finish part; `fail` replaces the
 * part at that index with a provider failure, `malformed` with a part that
 * does not decode. Its stream counts its finalizer runs in `finalized`.
 */
const provider = (
  deltas: ReadonlyArray<string>,
  fail: number | undefined,
  malformed: number | undefined,
  finalized: { count: number }
) => {
  const ids = Stream.mapEffect(
    Stream.fromIterable(deltas),
    (delta) =>
      Effect.map(IdGenerator.IdGenerator, (ids) => ids.generateId()).pipe(
        Effect.flatten,
        Effect.map((id): unknown => ({ type: "text-delta", id, delta }))
      )
  )
  const parts = Stream.concat(ids, Stream.make({ type: "finish", reason: "stop", usage }))
  return Stream.mapEffect(Stream.zipWithIndex(parts), ([part, i]) =>
    i === fail
      ? Effect.fail(new AiError.UnknownError({ module: "Provider", method: "streamText", description: `part ${i}` }))
      : Effect.succeed(i === malformed ? { type: "text-delta", id: 1 } : part)).pipe(
      Stream.ensuring(Effect.sync(() => finalized.count++))
    )
}

const drained = (
  make: typeof LanguageModel.make,
  deltas: ReadonlyArray<string>,
  options: { readonly fail?: number | undefined; readonly malformed?: number | undefined; readonly take?: number }
) =>
  Effect.gen(function*() {
    const finalized = { count: 0 }
    let next = 0
    const model = yield* make({
      generateText: () => Effect.dieMessage("not generated") as never,
      streamText: () => provider(deltas, options.fail, options.malformed, finalized) as never
    }).pipe(Effect.provideService(IdGenerator.IdGenerator, { generateId: () => Effect.sync(() => `id-${next++}`) }))
    const spans: Array<string> = []
    // a tracer that records the spans ended, by name and exit
    const tracer = Tracer.make({
      span: (name, parent, context, links, startTime, kind) => ({
        _tag: "Span",
        name,
        spanId: `span-${spans.length}`,
        traceId: "trace",
        parent,
        context,
        links,
        kind,
        sampled: true,
        status: { _tag: "Started", startTime },
        attributes: new Map(),
        end: (_endTime, exit) => {
          spans.push(`${name} ${exit._tag}`)
        },
        attribute: () => {},
        event: () => {},
        addLinks: () => {}
      }),
      context: (f) => f()
    })
    const stream = model.streamText({ prompt: "hi" })
    const exit = yield* Stream.runCollect(options.take === undefined ? stream : Stream.take(stream, options.take)).pipe(
      Effect.withTracer(tracer),
      Effect.exit
    )
    const parts = Exit.isSuccess(exit) ? Chunk.toArray(exit.value).map((part) => JSON.stringify(part)) : []
    const ended = Exit.isSuccess(exit)
      ? "success"
      : Option.match(Cause.failureOption(exit.cause), {
        onNone: () => "defect",
        onSome: (error) => `${(error as AiError.AiError)._tag}: ${(error as AiError.AiError).message}`
      })
    return { parts, exit: ended, spans, finalized: finalized.count } satisfies Observed
  })

describe("the patched streamText", () => {
  it.effect.prop(
    "drains as the unpatched one: the same parts, errors, ids, span ends and finalizer runs",
    {
      deltas: Schema.Array(Schema.String).pipe(Schema.maxItems(6)),
      fail: Schema.UndefinedOr(Schema.Int.pipe(Schema.between(0, 7))),
      malformed: Schema.UndefinedOr(Schema.Int.pipe(Schema.between(0, 7))),
      take: Schema.UndefinedOr(Schema.Int.pipe(Schema.between(1, 8)))
    },
    ({ deltas, fail, malformed, take }) =>
      Effect.gen(function*() {
        const Unpatched = yield* loadUnpatched
        const options = { fail, malformed, ...(take === undefined ? {} : { take }) }
        const patched = yield* drained(LanguageModel.make, deltas, options)
        const unpatched = yield* drained(Unpatched.make, deltas, options)
        assert.deepStrictEqual(patched, unpatched)
        // the stream was run, its finalizer ran once and its span ended once
        assert.strictEqual(patched.finalized, 1)
        assert.deepStrictEqual(patched.spans.filter((span) => span.startsWith("LanguageModel.streamText")).length, 1)
      }),
    { fastCheck: { numRuns: 40 } }
  )

  it.effect("reports a part that does not decode as MalformedOutput and a provider failure as it is", () =>
    Effect.gen(function*() {
      const malformed = yield* drained(LanguageModel.make, ["a", "b"], { malformed: 1 })
      assert.match(malformed.exit, /^MalformedOutput: /)
      assert.deepStrictEqual(malformed.spans, ["LanguageModel.streamText Failure"])
      const failed = yield* drained(LanguageModel.make, ["a", "b"], { fail: 2 })
      assert.strictEqual(failed.exit, "UnknownError: Provider.streamText: part 2")
      const whole = yield* drained(LanguageModel.make, ["a", "b"], {})
      assert.deepStrictEqual(whole.parts.map((part) => JSON.parse(part).id ?? JSON.parse(part).type), [
        "id-0",
        "id-1",
        "finish"
      ])
      assert.deepStrictEqual(whole.spans, ["LanguageModel.streamText Success"])
    }))

  it.effect("resolves streamed tool calls as the unpatched one: the calls, then their results", () =>
    Effect.gen(function*() {
      const Unpatched = yield* loadUnpatched
      const parts = (make: typeof LanguageModel.make) =>
        Effect.gen(function*() {
          const model = yield* make({
            generateText: () => Effect.dieMessage("not generated") as never,
            streamText: () =>
              Stream.make(
                { type: "tool-call", id: "c1", name: "add", params: { a: 2, b: 3 } },
                { type: "finish", reason: "tool-calls", usage }
              ) as never
          })
          const streamed = yield* Stream.runCollect(model.streamText({ prompt: "2 + 3?", toolkit: Calculator }))
          return Chunk.toArray(streamed).map((part) => JSON.stringify(part))
        })
      const patched = yield* parts(LanguageModel.make)
      assert.deepStrictEqual(patched, yield* parts(Unpatched.make))
      assert.deepStrictEqual(patched.map((part) => JSON.parse(part).type), ["tool-call", "finish", "tool-result"])
      assert.strictEqual(JSON.parse(patched[2]!).result, 5)
    }).pipe(Effect.provide(CalculatorLive)))
})

/** Own keys in order (symbols after strings, as `Reflect.ownKeys` lists them) with their values. */
const entries = (value: object) => Reflect.ownKeys(value).map((key) => [key, (value as any)[key]] as const)

describe("the patched part and message constructors", () => {
  // what 0.37.0 builds, written out as its object spreads
  const spreadPart = (type: string, params: any) => ({
    ...params,
    [Prompt.PartTypeId]: Prompt.PartTypeId,
    type,
    options: params.options ?? {}
  })
  const spreadMessage = (role: string, params: any) => ({
    ...params,
    [Prompt.MessageTypeId]: Prompt.MessageTypeId,
    role,
    options: params.options ?? {}
  })
  const spreadResponsePart = (type: string, params: any) => ({
    ...params,
    [Response.PartTypeId]: Response.PartTypeId,
    type,
    metadata: params.metadata ?? {}
  })
  // parameters of any shape, with or without the fields the constructors set
  const params = FastCheck.dictionary(
    FastCheck.oneof(FastCheck.constantFrom("type", "role", "options", "metadata", "id"), FastCheck.string()),
    FastCheck.oneof(FastCheck.string(), FastCheck.integer(), FastCheck.constant(undefined), FastCheck.object())
  )
  const kind = FastCheck.constantFrom("text", "tool-call", "tool-result", "user", "assistant")

  it.prop(
    "build the objects the spreads built: the same keys, in the same order, with the same values",
    [kind, params],
    ([type, given]) => {
      assert.deepStrictEqual(entries(Prompt.makePart(type as any, given as any)), entries(spreadPart(type, given)))
      assert.deepStrictEqual(
        entries(Prompt.makeMessage(type as any, given as any)),
        entries(spreadMessage(type, given))
      )
      assert.deepStrictEqual(
        entries(Response.makePart(type as any, given as any)),
        entries(spreadResponsePart(type, given))
      )
    }
  )

  it("keep an own `__proto__` key an own key, as a spread does, and never take it for the prototype", () => {
    // what a decoded JSON object may hold
    const given = JSON.parse(`{"__proto__": {"polluted": true}, "text": "a"}`)
    for (
      const built of [
        Prompt.makePart("text", given),
        Prompt.makeMessage("user", given),
        Response.makePart("text", given)
      ] as ReadonlyArray<object>
    ) {
      assert.isTrue(Object.hasOwn(built, "__proto__"))
      assert.strictEqual(Object.getPrototypeOf(built), Object.prototype)
      assert.isUndefined((built as { readonly polluted?: unknown }).polluted)
    }
  })

  it("are patched (no object spread)", () => {
    for (const build of ["esm", "cjs"]) {
      for (const file of ["Prompt.js", "Response.js"]) {
        const source = fs.readFileSync(path.join(aiRoot, "dist", build, file), "utf8")
        assert.isFalse(/=> \(\{\s*\.\.\.params,/.test(source), `${build}/${file}: still built with a spread`)
      }
    }
  })
})
