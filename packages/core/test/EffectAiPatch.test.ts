/**
 * The patch this repository applies to @effect/ai 0.37 (patches/, applied by
 * `npm ci` through patch-package): the response schema is built once per
 * tool set instead of on every model call. These tests fail when the patch
 * is missing, check that the cache keeps tool sets apart, and run the agent
 * on an unpatched copy of `LanguageModel` to show it does not depend on it.
 */
import { LanguageModel, Tool, Toolkit } from "@effect/ai"
import { assert, describe, it } from "@effect/vitest"
import { Agent } from "@stepwise-agent/core"
import { Effect, Logger, Schema } from "effect"
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
      // An unpatched copy of the ES module build, inside node_modules so that its imports resolve.
      const copy = path.join(aiRoot, "..", "..", ".cache", "stepwise-unpatched-ai")
      fs.rmSync(copy, { recursive: true, force: true })
      fs.cpSync(path.join(aiRoot, "dist", "esm"), copy, { recursive: true })
      let source = fs.readFileSync(path.join(copy, "LanguageModel.js"), "utf8")
      for (const [original, patched] of replaced) source = source.split(patched).join(original)
      fs.writeFileSync(path.join(copy, "LanguageModel.js"), source)
      for (const [original, patched] of replaced) {
        assert.isTrue(source.includes(`= ${original}`) && !source.includes(`= ${patched}`))
      }
      const Unpatched: typeof LanguageModel = yield* Effect.promise(() =>
        import(pathToFileURL(path.join(copy, "LanguageModel.js")).href)
      )
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
