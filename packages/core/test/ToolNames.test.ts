/**
 * Tool names that read the same: `Agent.make` checks every tool of the agent
 * together (its toolkit's, each middleware's, the structured output tool)
 * and refuses two whose names fold alike (`ToolName.fold`) or look alike
 * (`ToolName.skeleton`), before any run.
 */
import { Tool, Toolkit } from "@effect/ai"
import { assert, describe, it } from "@effect/vitest"
import { Agent, AgentError, Middleware, ToolName } from "@stepwise-agent/core"
import { ScriptedModel } from "@stepwise-agent/testing"
import { Cause, Effect, Exit, FastCheck, Option, Schema } from "effect"

/** A handled toolkit of tools named `names`, each answering nothing. */
const toolsNamed = (...names: ReadonlyArray<string>) => {
  const toolkit = Toolkit.make(...names.map((name) => Tool.make(name)))
  const handlers: Toolkit.HandlersFrom<Toolkit.Tools<typeof toolkit>> = Object.fromEntries(
    names.map((name) => [name, () => Effect.void])
  )
  return Effect.provide(toolkit, toolkit.toLayer(handlers))
}

/** A middleware contributing tools named `names`, as `TodoList` contributes `write_todos`. */
const contributing = (name: string, ...names: ReadonlyArray<string>) =>
  Middleware.make({ name, tools: toolsNamed(...names) })

const model = Effect.provide(ScriptedModel.layer([ScriptedModel.text("done")]))

/** The `ToolNameClash` `Agent.make` fails with (the test fails on any other outcome). */
const clashOf = <E, R>(make: Effect.Effect<unknown, E, R>) =>
  Effect.flatMap(Effect.flip(make), (error) =>
    error instanceof AgentError.ToolNameClash
      ? Effect.succeed(error)
      : Effect.dieMessage(`expected ToolNameClash, got ${String(error)}`))

/** Pairs of names that read the same, and what makes them differ. */
const twins: ReadonlyArray<readonly [string, string, string]> = [
  ["case", "read_file", "Read_File"],
  ["all capitals", "read_file", "READ_FILE"],
  ["full-width letters", "read_file", "\uff52\uff45\uff41\uff44_\uff46\uff49\uff4c\uff45"],
  ["a zero-width joiner", "read_file", "read\u200d_file"],
  ["a zero-width space", "read_file", "read_\u200bfile"],
  ["a soft hyphen", "read_file", "read\u00ad_file"],
  ["a byte order mark", "read_file", "\ufeffread_file"],
  ["a Hangul filler", "read_file", "read\u3164_file"],
  ["a combining accent", "r\u00e9sum\u00e9", "re\u0301sume\u0301"],
  ["a space at the end", "read_file", "read_file "],
  ["a no-break space at the start", "read_file", "\u00a0read_file"],
  ["a ligature", "find", "\ufb01nd"],
  ["a capital sharp s", "stra\u00dfe", "STRA\u1e9eE"],
  ["the same name", "read_file", "read_file"],
  ["a Cyrillic e", "read_file", "r\u0435ad_file"],
  ["a Greek omicron", "load", "l\u03bfad"],
  ["a capital I for an l", "read_file", "read_fiIe"],
  ["a digit one for an l", "read_file", "read_fi1e"],
  ["rn for m", "make_item", "rnake_item"],
  ["Cyrillic capitals", "COPY", "\u0421\u041e\u0420\u0423"],
  ["a mathematical bold a", "save", "s\ud835\udc1ave"],
  ["a capital and a Cyrillic e", "read_file", "R\u0435ad_file"],
  ["Cyrillic capital Es", "delete", "D\u0415L\u0415T\u0415"],
  ["capitals with an l for an I", "delete_file", "DELETE_FlLE"],
  ["a lunate capital sigma for C", "cat", "\u03f9AT"],
  ["a Cyrillic capital A", "a", "\u0410"],
  ["a braille blank at the end", "read_file", "read_file\u2800"]
]

describe("Agent.make: tool names that read the same", () => {
  for (const [what, first, second] of twins) {
    it.effect(`refuses a toolkit tool and a middleware tool differing by ${what}, before any model call`, () =>
      Effect.gen(function*() {
        const error = yield* clashOf(
          Agent.make({ toolkit: toolsNamed(first, "other"), middleware: [contributing("files", second)] })
        )
        assert.deepInclude(error, {
          tool: second,
          source: `middleware "files"`,
          twin: first,
          twinSource: "the toolkit"
        })
        // both names shown, escaped where they are not printable ASCII: they look different in the message
        assert.include(error.message, ToolName.quote(first))
        assert.include(error.message, ToolName.quote(second))
        assert.deepStrictEqual(yield* ScriptedModel.requests, [])
      }).pipe(model))
  }

  it.effect("refuses look-alikes of two middleware (two servers), naming each middleware", () =>
    Effect.gen(function*() {
      const error = yield* clashOf(Agent.make({
        middleware: [contributing("github", "create_issue"), contributing("evil", "Create_Issue\u200b")]
      }))
      assert.deepInclude(error, {
        tool: "Create_Issue\u200b",
        source: `middleware "evil"`,
        twin: "create_issue",
        twinSource: `middleware "github"`
      })
      assert.include(error.message, `Tool "Create_Issue\\u200b" of middleware "evil" reads the same as tool`)
      assert.include(error.message, `"create_issue" of middleware "github"`)
    }).pipe(model))

  it.effect("refuses look-alikes within the toolkit itself", () =>
    Effect.gen(function*() {
      const error = yield* clashOf(Agent.make({ toolkit: toolsNamed("send_email", "Send_Email") }))
      assert.deepInclude(error, { source: "the toolkit", twinSource: "the toolkit" })
    }).pipe(model))

  it.effect("refuses one toolkit passed twice: as the toolkit and as a middleware's tools, or to two middleware", () =>
    Effect.gen(function*() {
      const shared = toolsNamed("search")
      const asBoth = yield* clashOf(
        Agent.make({ toolkit: shared, middleware: [Middleware.make({ name: "again", tools: shared })] })
      )
      assert.deepInclude(asBoth, { tool: "search", source: `middleware "again"`, twinSource: "the toolkit" })
      const twice = yield* clashOf(Agent.make({
        middleware: [Middleware.make({ name: "a", tools: shared }), Middleware.make({ name: "b", tools: shared })]
      }))
      assert.deepInclude(twice, { source: `middleware "b"`, twinSource: `middleware "a"` })
    }).pipe(model))

  it.effect("refuses a structured output tool whose name reads as a tool's", () =>
    Effect.gen(function*() {
      const Answer = Schema.Struct({ answer: Schema.String })
      const byDefault = yield* clashOf(
        Agent.make({ toolkit: toolsNamed("Final_Answer"), responseFormat: Answer })
      )
      assert.deepInclude(byDefault, {
        tool: "final_answer",
        source: "the agent's structured output (outputToolName)",
        twin: "Final_Answer"
      })
      const named = yield* clashOf(
        Agent.make({ toolkit: toolsNamed("search"), responseFormat: Answer, outputToolName: "\uff53earch" })
      )
      assert.strictEqual(named.twin, "search")
    }).pipe(model))

  it.effect("accepts names that differ in more than case, form, width, look-alike letters, invisible characters and end spaces", () =>
    Effect.gen(function*() {
      const agent = yield* Agent.make({
        toolkit: toolsNamed("delete", "delete_all", "delete.v2", "del-ete", "d\u00e9lete"),
        middleware: [contributing("more", "delete2", "de_lete", "delete\u0301x")]
      })
      assert.strictEqual((yield* agent.run("go", { threadId: "t" }))._tag, "Completed")
    }).pipe(model))

  // names drawn from few characters, many of which fold alike, so that twins are frequent
  const name = FastCheck.array(
    FastCheck.constantFrom(
      "a",
      "A",
      "\uff41", // full-width a
      "b",
      "_",
      " ",
      "\u00a0", // no-break space
      "\u200b", // zero-width space
      "\u200d", // zero-width joiner
      "\u00e9", // é precomposed
      "e\u0301", // é decomposed
      "e",
      "\u0435", // Cyrillic е (looks as e)
      "\u00df", // ß (folds as "ss")
      "s",
      "l",
      "I", // looks as l
      "1" // looks as l
    ),
    { minLength: 1, maxLength: 5 }
  ).map((parts) => parts.join(""))

  it.effect.prop(
    "any two names with the same fold or skeleton are refused, other names accepted",
    { first: name, second: name },
    ({ first, second }) =>
      Effect.gen(function*() {
        const exit = yield* Effect.exit(
          Agent.make({ toolkit: toolsNamed(first), middleware: [contributing("other", second)] })
        )
        const error = Exit.isFailure(exit) ? Cause.failureOption(exit.cause) : Option.none()
        if (ToolName.problemOf(first) !== undefined || ToolName.problemOf(second) !== undefined) {
          assert.isTrue(Option.isSome(error) && error.value._tag === "AgentConfigError", String(exit))
          return
        }
        const refused = Option.isSome(error) && error.value._tag === "ToolNameClash"
        const readAlike = ToolName.keys(first).some((key) => ToolName.keys(second).includes(key))
        assert.strictEqual(refused, readAlike, JSON.stringify([first, second]))
        // accepted means built: no other error either
        if (!refused) assert.isTrue(Exit.isSuccess(exit), String(exit))
      }).pipe(model),
    { fastCheck: { numRuns: 150 } }
  )

  it.prop(
    "the fold of a name folds to itself, and every case of a name folds alike",
    {
      text: FastCheck.array(
        FastCheck.oneof(
          FastCheck.fullUnicode(),
          // letters whose case or compatibility forms change their length or meet other letters'
          FastCheck.constantFrom(
            "\u1f80\u0301",
            "\u1e9e",
            "\u00df",
            "\u0130",
            "\u0131",
            "\u03c2",
            "\ufb01",
            "\uff21",
            "\u200b",
            "\u0301"
          )
        ),
        { maxLength: 12 }
      ).map((chars) => chars.join(""))
    },
    ({ text }) => {
      const folded = ToolName.fold(text)
      assert.strictEqual(ToolName.fold(folded), folded)
      // a case of a name is its canonical form's (Unicode's caseless match maps the NFD form), as a reader sees it
      // (without invisible characters): upper-casing a raw "\u1f80\u0301" turns its iota subscript into a letter
      // before the acute ("\u1f08\u0399\u0301"), and in "\u1f84\u200b\u0301" the acute after the invisible space
      // follows that letter: another name
      const seen = text.replace(/[\p{Default_Ignorable_Code_Point}\u2800]/gu, "").normalize("NFD")
      assert.strictEqual(ToolName.fold(seen.toUpperCase()), folded)
      assert.strictEqual(ToolName.fold(seen.toLowerCase()), folded)
      assert.strictEqual(ToolName.fold(text.normalize("NFD")), folded)
    },
    { fastCheck: { numRuns: 2000 } }
  )

  it.effect.prop(
    "a name and any variant of it in case, width, invisible characters, accent form or end spaces are refused",
    {
      base: FastCheck.stringMatching(/^[a-z][a-z0-9_]{0,11}$/),
      changes: FastCheck.array(FastCheck.constantFrom("upper", "wide", "zwj", "zws", "space", "accent"), {
        minLength: 1,
        maxLength: 4
      }),
      at: FastCheck.nat()
    },
    ({ at, base, changes }) =>
      Effect.gen(function*() {
        const original = `${base}\u00e9`
        const variant = changes.reduce((text, change) => {
          const i = at % (text.length + 1)
          switch (change) {
            case "upper":
              return text.toUpperCase()
            case "wide":
              // U+FF01…U+FF5E: the full-width forms of "!" … "~"
              return [...text].map((c) => c > " " && c <= "~" ? String.fromCodePoint(c.codePointAt(0)! + 0xfee0) : c)
                .join("")
            case "zwj":
              return text.slice(0, i) + "\u200d" + text.slice(i)
            case "zws":
              return text.slice(0, i) + "\u200b" + text.slice(i)
            case "accent":
              // the name's "é" decomposed: "e" and a combining accent
              return text.normalize("NFD")
            default: // "space"
              return `${text} `
          }
        }, original)
        const error = yield* clashOf(
          Agent.make({ toolkit: toolsNamed(original), middleware: [contributing("other", variant)] })
        )
        assert.strictEqual(error.tool, variant)
      }).pipe(model),
    { fastCheck: { numRuns: 100 } }
  )
})

describe("ToolName.skeleton", () => {
  it.prop(
    "invisible characters and the NFD form leave a name's skeleton as it is",
    {
      text: FastCheck.array(
        FastCheck.oneof(FastCheck.fullUnicode(), FastCheck.constantFrom("\u0435", "I", "1", "m", "\u200b", "\u0301")),
        { maxLength: 12 }
      ).map((chars) => chars.join(""))
    },
    ({ text }) => {
      const skeleton = ToolName.skeleton(text)
      assert.strictEqual(ToolName.skeleton(text.normalize("NFD")), skeleton)
      assert.strictEqual(ToolName.skeleton(`\u200b${text}\u200d`), skeleton)
    },
    { fastCheck: { numRuns: 2000 } }
  )
})

describe("Agent.make: names that cannot be a tool's", () => {
  const refusals: ReadonlyArray<readonly [string, string]> = [
    ["a right-to-left override (shows as read_file)", "\u202eelif_daer"],
    ["a left-to-right isolate", "read\u2066_file"],
    ["only a zero-width space", "\u200b"],
    ["only a braille blank", "\u2800"],
    ["a NUL", "read\u0000file"],
    ["a line feed", "read\nfile"],
    ["more than maxLength characters", "a".repeat(ToolName.maxLength + 1)]
  ]
  for (const [what, name] of refusals) {
    it.effect(`refuses a name with ${what}, naming the tool and where it came from`, () =>
      Effect.gen(function*() {
        const error = yield* Effect.flip(Agent.make({ middleware: [contributing("files", name)] }))
        assert.strictEqual(error._tag, "AgentConfigError")
        assert.include(error.message, `of middleware "files" cannot be a tool's name`)
        assert.isDefined(ToolName.problemOf(name))
      }).pipe(model))
  }

  it.effect("refuses a structured output tool of an invisible name", () =>
    Effect.gen(function*() {
      const error = yield* Effect.flip(
        Agent.make({ responseFormat: Schema.Struct({ a: Schema.String }), outputToolName: "\u2800" })
      )
      assert.strictEqual(error._tag, "AgentConfigError")
    }).pipe(model))

  it("checks a megabyte of stacked combining marks at once: refused by its length before any normalizing", () => {
    const name = "a" + "\u0301\u0316\u0300\u0317".repeat(262_144)
    const started = performance.now()
    assert.isDefined(ToolName.problemOf(name))
    assert.isBelow(performance.now() - started, 1_000)
  })

  it("keys of the longest name allowed, of stacked combining marks, are quick", () => {
    const name = "a" + "\u0301\u0316\u0300\u0317".repeat((ToolName.maxLength - 1) / 4 | 0)
    assert.isUndefined(ToolName.problemOf(name))
    const started = performance.now()
    ToolName.keys(name)
    assert.isBelow(performance.now() - started, 1_000)
  })
})
