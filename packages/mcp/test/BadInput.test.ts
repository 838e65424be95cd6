/**
 * Options of the wrong type, from JavaScript: `McpToolkit.make` fails with
 * `InvalidOptions` naming the option before it connects to anything (no
 * process is spawned, no request sent) — never a defect or a throw — and a
 * credential (`env`, `headers`) is never shown, only its type.
 */
import { assert, describe, it } from "@effect/vitest"
import { McpToolkit } from "@stepwise-agent/mcp"
import { Cause, Effect, Exit, Option } from "effect"

const wrong: ReadonlyArray<readonly [string, unknown]> = [
  ["a number", 42],
  ["null", null],
  ["an object", { a: 1 }],
  ["an array", [1]],
  ["a symbol", Symbol("s")],
  ["a bigint", 10n],
  ["a function", () => 1],
  ["an object without a prototype", Object.create(null)],
  ["an array holding a symbol", [Symbol("q")]]
]

/** A server that is never reached: every probe fails before it connects. */
const server = { connect: () => Promise.reject(new Error("not reached")) }

const failureOf = (label: string, options: unknown) =>
  Effect.gen(function*() {
    let built: Effect.Effect<unknown, unknown, any>
    try {
      built = McpToolkit.make(options as McpToolkit.Options)
    } catch (error) {
      return assert.fail(`${label}: threw ${String(error)}`)
    }
    const exit = yield* Effect.exit(Effect.scoped(built))
    if (Exit.isSuccess(exit)) return assert.fail(`${label}: connected`)
    const failure = Cause.failureOption(exit.cause)
    if (Option.isNone(failure)) return assert.fail(`${label}: died: ${Cause.pretty(exit.cause).slice(0, 300)}`)
    return failure.value as { readonly _tag: string; readonly message: string }
  })

const expectInvalid = (label: string, options: unknown, option: string) =>
  Effect.gen(function*() {
    const error = yield* failureOf(label, options)
    assert.strictEqual(error._tag, "InvalidOptions", `${label}: ${error.message}`)
    assert.include(error.message, `McpToolkit option "${option}`, label)
    return error
  })

describe("McpToolkit.make given options of the wrong type", () => {
  it.effect("no options, or options that are not an object", () =>
    Effect.gen(function*() {
      for (const [label, value] of [...wrong, ["undefined", undefined] as const]) {
        if (typeof value === "object" && value !== null) continue
        if (typeof value === "function") continue
        yield* expectInvalid(label, value, "options")
      }
    }))

  it.effect("each option of the transports", () =>
    Effect.gen(function*() {
      for (const [label, value] of wrong) {
        yield* expectInvalid(`name ${label}`, { name: value, transport: { _tag: "InProcess", server } }, "name")
        yield* expectInvalid(`transport ${label}`, { name: "n", transport: value }, "transport")
        yield* expectInvalid(`_tag ${label}`, { name: "n", transport: { _tag: value } }, "transport")
        yield* expectInvalid(
          `command ${label}`,
          { name: "n", transport: { _tag: "Stdio", command: value } },
          "transport.command"
        )
        if (!Array.isArray(value) || value.some((arg) => typeof arg !== "string")) {
          yield* expectInvalid(
            `args ${label}`,
            { name: "n", transport: { _tag: "Stdio", command: "never-spawned", args: value } },
            "transport.args"
          )
        }
        yield* expectInvalid(
          `cwd ${label}`,
          { name: "n", transport: { _tag: "Stdio", command: "never-spawned", cwd: value } },
          "transport.cwd"
        )
        yield* expectInvalid(`url ${label}`, { name: "n", transport: { _tag: "Http", url: value } }, "transport.url")
        yield* expectInvalid(
          `server ${label}`,
          { name: "n", transport: { _tag: "InProcess", server: value } },
          "transport.server"
        )
        if (typeof value !== "number" && typeof value !== "bigint") {
          yield* expectInvalid(
            `concurrency ${label}`,
            { name: "n", transport: { _tag: "InProcess", server }, concurrency: value },
            "concurrency"
          )
          yield* expectInvalid(
            `timeout ${label}`,
            { name: "n", transport: { _tag: "InProcess", server }, timeout: value },
            "timeout"
          )
        }
      }
    }))

  it.effect("a credential of the wrong type is refused by its name, its value never shown", () =>
    Effect.gen(function*() {
      for (const [label, value] of [...wrong, ["a long number", 987654321987] as const]) {
        const header = yield* expectInvalid(
          `header ${label}`,
          { name: "n", transport: { _tag: "Http", url: "http://127.0.0.1:1/mcp", headers: { Authorization: value } } },
          `transport.headers["Authorization"]`
        )
        assert.notInclude(header.message, "987654321987")
        const env = yield* expectInvalid(
          `env ${label}`,
          { name: "n", transport: { _tag: "Stdio", command: "never-spawned", env: { API_KEY: value } } },
          `transport.env["API_KEY"]`
        )
        assert.notInclude(env.message, "987654321987")
      }
      for (const [label, value] of wrong) {
        if (typeof value === "object" && value !== null && !Array.isArray(value)) continue // a record: its entries
        yield* expectInvalid(
          `headers ${label}`,
          { name: "n", transport: { _tag: "Http", url: "http://127.0.0.1:1/mcp", headers: value } },
          "transport.headers"
        )
      }
    }))
})
