import { LanguageModel } from "@effect/ai"
import { assert, describe, it } from "@effect/vitest"
import { Agent } from "@stepwise-agent/core"
import { ScriptedModel } from "@stepwise-agent/testing"
import { Effect, Either, FastCheck } from "effect"
import * as Filesystem from "../src/Filesystem.js"
import * as Paths from "../src/internal/workspacePaths.js"
import * as Workspace from "../src/Workspace.js"

// A rule's glob is expanded into the plain patterns its braces stand for:
// no rule may make that recurse without bound or take memory without bound.

const nested = (depth: number) => `/docs/${"{a,".repeat(depth)}b${"}".repeat(depth)}`
/** 256 plain patterns (8 groups of 2) and then `tail` characters. */
const wide = (tail: number) => `/${"{a,b}".repeat(8)}/${"x".repeat(tail)}`

const cases: ReadonlyArray<readonly [string, string, string]> = [
  ["5,000 nested braces", nested(5_000), "nest more than 32 deep (maxRuleNesting)"],
  ["33 nested braces", nested(33), "nest more than 32 deep"],
  ["a 1 MB pattern of 256 alternatives", wide(1_000_000), "65,536 characters (maxRuleSize)"],
  ["256 alternatives of 300 characters each (77 KB written out)", wide(300), "65,536 characters (maxRuleSize)"],
  ["257 alternatives", `/${"{a,b}".repeat(8)}{c,d}`, "more than 256 patterns (maxRuleAlternatives)"]
]

describe("rule globs have bounded expansions", () => {
  for (const [what, pattern, reason] of cases) {
    it.effect(`a rule of ${what} is refused with InvalidOptions naming the limit`, () =>
      Effect.gen(function*() {
        const model = yield* ScriptedModel.make([])
        const error = yield* Agent.make({
          middleware: [
            Filesystem.middleware({ rules: [{ pattern: "/x", access: "read-only" }, { pattern, access: "read-only" }] })
          ]
        }).pipe(Effect.provideService(LanguageModel.LanguageModel, model.model), Effect.flip)
        assert.strictEqual(error._tag, "InvalidOptions")
        assert.include(error.message, "rules[1].pattern")
        assert.include(error.message, reason)
        // the pattern is shown cut, never whole
        assert.isBelow(error.message.length, 600)
      }), 30_000)
  }

  it.effect(
    "a workspace that cannot refuse holds such a read-only rule over every path, at once",
    () =>
      Effect.gen(function*() {
        const started = performance.now()
        const workspace = yield* Workspace.makeMemory({
          rules: [{ pattern: nested(5_000), access: "read-only" }, { pattern: wide(1_000_000), access: "read-write" }],
          files: { "/a.md": "a" }
        })
        const written = yield* Effect.either(workspace.write("/b.md", "b"))
        assert.isTrue(Either.isLeft(written))
        assert.isBelow(performance.now() - started, 5_000)
      }),
    30_000
  )

  it("limits hold at the limit: 32 deep, 256 plain patterns, 65,536 characters are accepted", () => {
    assert.strictEqual(Paths.ruleProblem(nested(32)), undefined)
    assert.strictEqual(Paths.ruleProblem(`/${"{a,b}".repeat(8)}`), undefined)
    // 256 plain patterns of 256 characters: 65,536 in all
    assert.strictEqual(Paths.ruleProblem(`/${"{a,b}".repeat(8)}${"x".repeat(247)}`), undefined)
    assert.include(Paths.ruleProblem(`/${"{a,b}".repeat(8)}${"x".repeat(248)}`), "maxRuleSize")
  })

  it.prop(
    "a rule is refused exactly when it nests too deep, stands for too many patterns or too many characters",
    [
      FastCheck.integer({ min: 0, max: 80 }),
      FastCheck.integer({ min: 0, max: 10 }),
      FastCheck.integer({ min: 0, max: 2_000 })
    ],
    ([depth, groups, tail]) => {
      const pattern = `/${"{a,".repeat(depth)}b${"}".repeat(depth)}${"{c,d}".repeat(groups)}${"x".repeat(tail)}`
      const started = performance.now()
      const problem = Paths.ruleProblem(pattern)
      assert.isBelow(performance.now() - started, 2_000)
      const plains = (depth + 1) * 2 ** groups
      // each plain pattern: "/", one letter for the nested group, one per group, the tail
      const size = plains * (2 + groups + tail)
      const expected = depth > 32
        ? "maxRuleNesting"
        : plains > 256
        ? "maxRuleAlternatives"
        : size > 65_536
        ? "maxRuleSize"
        : undefined
      if (expected === undefined) assert.strictEqual(problem, undefined, pattern)
      else assert.include(problem, expected, pattern)
    },
    { fastCheck: { numRuns: 300 } }
  )
})

describe("glob calls and tool arguments", () => {
  it.effect("glob() with braces nested to its length limit answers, and a longer pattern is refused", () =>
    Effect.gen(function*() {
      const workspace = yield* Workspace.makeMemory({ files: { "/a/b.md": "x" } })
      const deep = `${"{".repeat(128)}${"}".repeat(128)}`
      assert.strictEqual(deep.length, Workspace.maxGlobLength)
      assert.deepStrictEqual(yield* workspace.glob(deep), [])
      const deepest = `${"{a,".repeat(63)}**${"}".repeat(63)}`
      assert.deepStrictEqual(yield* workspace.glob(deepest), ["/a/b.md"])
      const error = yield* Effect.flip(workspace.glob(`${"{".repeat(2_500)}${"}".repeat(2_500)}`))
      assert.strictEqual(error.reason, "GlobTooLong")
    }))

  it.effect(
    "the Filesystem glob and grep tools answer a pattern nested to the limit, and refuse a deeper one",
    () =>
      Effect.gen(function*() {
        const deep = `${"{a,".repeat(63)}**${"}".repeat(63)}`
        const deeper = `${"{".repeat(5_000)}*${"}".repeat(5_000)}`
        const model = yield* ScriptedModel.make([
          ScriptedModel.toolCalls([
            { name: "write_file", params: { file_path: "/a/b.md", content: "needle" }, id: "w" },
            { name: "glob", params: { pattern: deep }, id: "g1" },
            { name: "grep", params: { pattern: "needle", glob: deep }, id: "g2" },
            { name: "glob", params: { pattern: deeper }, id: "g3" },
            { name: "grep", params: { pattern: "needle", glob: deeper }, id: "g4" }
          ]),
          ScriptedModel.text("done")
        ])
        const agent = yield* Agent.make({ middleware: [Filesystem.middleware()] }).pipe(
          Effect.provideService(LanguageModel.LanguageModel, model.model)
        )
        const result = yield* agent.run("go", { threadId: "t" })
        assert.strictEqual(result._tag, "Completed")
        const results = new Map(
          result.state.messages.flatMap((message) =>
            message.role === "tool"
              ? message.content.flatMap((part) => part.type === "tool-result" ? [[part.id, part] as const] : [])
              : []
          )
        )
        assert.strictEqual(results.get("g1")?.result, "/a/b.md")
        assert.include(JSON.stringify(results.get("g2")?.result), "/a/b.md")
        for (const id of ["g3", "g4"]) {
          assert.isTrue(results.get(id)?.isFailure, id)
          assert.include(JSON.stringify(results.get(id)?.result), String(Workspace.maxGlobLength), id)
        }
      }),
    30_000
  )
})
