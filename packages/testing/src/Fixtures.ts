/**
 * Tool and toolkit fixtures for tests: `echo`, `add` and a `fail` tool that
 * fails on demand, a toolkit of all three with its handlers layer, and an
 * echo-only toolkit for tests that need one harmless tool.
 *
 * @since 0.1.0
 */
import * as Tool from "@effect/ai/Tool"
import * as Toolkit from "@effect/ai/Toolkit"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"

/**
 * `echo(text)`: answers with its `text`.
 *
 * @example
 * ```ts
 * import { Fixtures } from "@stepwise-agent/testing"
 *
 * console.log(Fixtures.Echo.name)
 * ```
 * <!-- output: echo -->
 *
 * @since 0.1.0
 * @category constructors
 */
export const Echo = Tool.make("echo", {
  description: "Answers with its text",
  parameters: { text: Schema.String },
  success: Schema.String
})

/**
 * `add(a, b)`: answers with `a + b`.
 *
 * @example
 * ```ts
 * import { Fixtures } from "@stepwise-agent/testing"
 *
 * console.log(Fixtures.Add.name)
 * ```
 * <!-- output: add -->
 *
 * @since 0.1.0
 * @category constructors
 */
export const Add = Tool.make("add", {
  description: "Adds two numbers",
  parameters: { a: Schema.Number, b: Schema.Number },
  success: Schema.Number
})

/**
 * `fail(reason)`: always fails with `{ reason }`, for failure tests (the
 * agent sees a failed tool result).
 *
 * @example
 * ```ts
 * import { Fixtures } from "@stepwise-agent/testing"
 *
 * console.log(Fixtures.Fail.name)
 * ```
 * <!-- output: fail -->
 *
 * @since 0.1.0
 * @category constructors
 */
export const Fail = Tool.make("fail", {
  description: "Fails with the given reason",
  parameters: { reason: Schema.String },
  success: Schema.String,
  failure: Schema.Struct({ reason: Schema.String })
})

/**
 * A toolkit of {@link Echo}, {@link Add} and {@link Fail}; its handlers are
 * {@link layer}.
 *
 * @example
 * ```ts
 * import { Fixtures } from "@stepwise-agent/testing"
 *
 * console.log(Object.keys(Fixtures.toolkit.tools))
 * ```
 * <!-- output: [ 'echo', 'add', 'fail' ] -->
 *
 * @since 0.1.0
 * @category constructors
 */
export const toolkit = Toolkit.make(Echo, Add, Fail)

/**
 * The handlers of {@link toolkit}: `echo` answers its text, `add` the sum,
 * `fail` fails with its reason.
 *
 * @example
 * ```ts
 * import { Agent } from "@stepwise-agent/core"
 * import { Fixtures, ScriptedModel } from "@stepwise-agent/testing"
 * import { Effect } from "effect"
 *
 * const program = Effect.gen(function*() {
 *   const agent = yield* Agent.make({ toolkit: Fixtures.toolkit })
 *   return yield* agent.run("1 + 2?", { threadId: "t" })
 * }).pipe(
 *   Effect.provide([
 *     ScriptedModel.layer([
 *       ScriptedModel.toolCalls([{ name: "add", params: { a: 1, b: 2 } }]),
 *       ScriptedModel.text("3")
 *     ]),
 *     Fixtures.layer
 *   ])
 * )
 * ```
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = toolkit.toLayer({
  echo: ({ text }) => Effect.succeed(text),
  add: ({ a, b }) => Effect.succeed(a + b),
  fail: ({ reason }) => Effect.fail({ reason })
})

/**
 * A toolkit with {@link Echo} only; its handler is {@link echoLayer}.
 *
 * @example
 * ```ts
 * import { Fixtures } from "@stepwise-agent/testing"
 *
 * console.log(Object.keys(Fixtures.echoToolkit.tools))
 * ```
 * <!-- output: [ 'echo' ] -->
 *
 * @since 0.1.0
 * @category constructors
 */
export const echoToolkit = Toolkit.make(Echo)

/**
 * The handler of {@link echoToolkit}: `echo` answers its text.
 *
 * @example
 * ```ts
 * import { Agent } from "@stepwise-agent/core"
 * import { Fixtures, ScriptedModel } from "@stepwise-agent/testing"
 * import { Effect } from "effect"
 *
 * const program = Effect.gen(function*() {
 *   const agent = yield* Agent.make({ toolkit: Fixtures.echoToolkit })
 *   return yield* agent.run("go", { threadId: "t" })
 * }).pipe(
 *   Effect.provide([
 *     ScriptedModel.layer([
 *       ScriptedModel.toolCalls([{ name: "echo", params: { text: "x" } }]),
 *       ScriptedModel.text("done")
 *     ]),
 *     Fixtures.echoLayer
 *   ])
 * )
 * ```
 *
 * @since 0.1.0
 * @category layers
 */
export const echoLayer = echoToolkit.toLayer({ echo: ({ text }) => Effect.succeed(text) })
