/**
 * A key `McpToolkit.make` (or `layer`) does not know, in its options or in
 * their transport (a typo, an option of the SDK's client or of another
 * library), fails with `InvalidOptions` naming it and the keys it knows,
 * before anything connects. Before, it was ignored and the toolkit
 * connected without it.
 */
import { assert, describe, it } from "@effect/vitest"
import { McpToolkit } from "@stepwise-agent/mcp"
import { Cause, Effect, Exit, FastCheck, Layer, Option } from "effect"

/** A server that counts the connections tried: none may be. */
const counting = () => {
  let connects = 0
  return {
    server: {
      connect: () => {
        connects++
        return Promise.reject(new Error("not reached"))
      }
    },
    connects: () => connects
  }
}

const failureOf = (label: string, build: () => Effect.Effect<unknown, unknown, any>) =>
  Effect.gen(function*() {
    const exit = yield* Effect.exit(Effect.scoped(build()))
    if (Exit.isSuccess(exit)) return assert.fail(`${label}: connected`)
    const failure = Cause.failureOption(exit.cause)
    if (Option.isNone(failure)) return assert.fail(`${label}: died: ${Cause.pretty(exit.cause).slice(0, 300)}`)
    return failure.value as { readonly _tag: string; readonly option?: string; readonly message: string }
  })

const make = (options: unknown) => McpToolkit.make(options as McpToolkit.Options)
const layer = (options: unknown) => Layer.build(McpToolkit.layer(options as McpToolkit.Options))

describe("McpToolkit options with a key it does not know", () => {
  it.effect(
    "fail with InvalidOptions naming the key, in the options and in each transport, before connecting",
    () =>
      Effect.gen(function*() {
        const { connects, server } = counting()
        const inProcess = { _tag: "InProcess", server }
        const stdio = { _tag: "Stdio", command: "/nonexistent/mcp-server" }
        const http = { _tag: "Http", url: "http://127.0.0.1:1/mcp" }
        const cases: ReadonlyArray<readonly [string, unknown, string, string]> = [
          ["options", { name: "n", transport: inProcess, timeoutMs: 5 }, "timeoutMs", "\"concurrency\""],
          ["options", { name: "n", transport: inProcess, clientInfo: {} }, "clientInfo", "\"timeout\""],
          [
            "Stdio",
            { name: "n", transport: { ...stdio, environment: { A: "1" } } },
            "transport.environment",
            "\"env\""
          ],
          ["Stdio", { name: "n", transport: { ...stdio, stderr: "pipe" } }, "transport.stderr", "\"cwd\""],
          ["Http", { name: "n", transport: { ...http, requestInit: {} } }, "transport.requestInit", "\"headers\""],
          ["Http", { name: "n", transport: { ...http, authProvider: {} } }, "transport.authProvider", "\"url\""],
          ["InProcess", { name: "n", transport: { ...inProcess, bogus: 1 } }, "transport.bogus", "\"server\""]
        ]
        for (const [label, options, option, knows] of cases) {
          for (const [via, build] of [["make", make], ["layer", layer]] as const) {
            const error = yield* failureOf(`${via} ${label} ${option}`, () => build(options))
            assert.strictEqual(error._tag, "InvalidOptions", `${via} ${label}: ${error.message}`)
            assert.strictEqual(error.option, option)
            assert.include(error.message, "is unknown; expected")
            assert.include(error.message, knows)
          }
        }
        assert.strictEqual(connects(), 0)
      }),
    60_000
  )

  it.effect("a transport that is not an object of a known kind is still named as before", () =>
    Effect.gen(function*() {
      const error = yield* failureOf("transport", () => make({ name: "n", transport: { _tag: "Websocket", url: "x" } }))
      assert.strictEqual(error._tag, "InvalidOptions")
      assert.strictEqual(error.option, "transport")
    }))

  it.effect.prop(
    "any key outside the known ones is refused, naming it",
    { key: FastCheck.string({ minLength: 1, maxLength: 20 }) },
    ({ key }) =>
      Effect.gen(function*() {
        const { connects, server } = counting()
        const known = ["name", "transport", "timeout", "concurrency"]
        const error = yield* failureOf(
          key,
          () => make({ name: "n", transport: { _tag: "InProcess", server }, [key]: 1 })
        )
        if (known.includes(key)) {
          assert.notInclude(error.message, "is unknown")
        } else {
          assert.strictEqual(error.option, key)
          assert.strictEqual(connects(), 0)
        }
      }),
    { timeout: 60_000, fastCheck: { numRuns: 50 } }
  )
})
