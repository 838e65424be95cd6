/**
 * Evals as vitest tests: `describe(suite)` registers one test per case,
 * which fails with the table of the case's failed assertions and runs when
 * its pass rate is below the suite's. Imported by its subpath only,
 * `@stepwise-agent/testing/vitest`, so the package root never loads vitest
 * (an optional peer dependency).
 *
 * @since 0.1.0
 */
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as vitest from "vitest"
import * as Eval from "./Eval.js"
import { unknownKey } from "./internal/options.js"

/**
 * Options of {@link describe} and {@link it}.
 *
 * @since 0.1.0
 * @category models
 */
export interface Options {
  /** The test's timeout in milliseconds (vitest's default when undefined). */
  readonly timeout?: number | undefined
  /**
   * The tests are expected to fail (vitest's `it.fails`): for a known
   * regression, so the test suite goes red when the eval starts passing.
   */
  readonly fails?: boolean | undefined
}

/** The test function of `options`; options with a key it does not know throw `Eval.InvalidEval` naming it. */
const register = (method: string, options: Options | undefined) => {
  const unknown = unknownKey("vitest", options, ["timeout", "fails"], method)
  if (unknown !== undefined) throw new Eval.InvalidEval({ field: unknown.option, reason: unknown.reason })
  return options?.fails === true ? vitest.it.fails : vitest.it
}

/**
 * Runs the cases named `cases` of `suite` and throws, with the table of the
 * failures, when one is below the pass rate; an invalid suite throws its
 * `InvalidEval`.
 */
const check = async (suite: Eval.Suite, cases?: ReadonlyArray<string>): Promise<void> => {
  const exit = await Effect.runPromiseExit(Eval.run(suite, { cases }).pipe(Effect.flatMap(Eval.assertPassed)))
  if (Exit.isFailure(exit)) {
    const error = Cause.squash(exit.cause)
    throw error instanceof Eval.EvalFailed ? new Error(`\n${error.message}`) : error
  }
}

/**
 * Registers a vitest `describe` block named after the suite with one test
 * per case. A case's test runs its trials and fails when its pass rate is
 * below the suite's `passRate`, with the table of its failed assertions and
 * runs as the message. The suite needs no services: provide them to its
 * `agent` (with `Effect.provide`) when you make it.
 *
 * @example
 * ```ts
 * import { Agent } from "@stepwise-agent/core"
 * import { Eval, Fixtures, ScriptedModel } from "@stepwise-agent/testing"
 * import * as EvalVitest from "@stepwise-agent/testing/vitest"
 * import { Effect } from "effect"
 *
 * EvalVitest.describe(Eval.make({
 *   name: "calculator",
 *   agent: Agent.make({ toolkit: Fixtures.toolkit }).pipe(Effect.provide(Fixtures.layer)),
 *   cases: [{
 *     name: "adds",
 *     input: "What is 1 + 2?",
 *     script: [ScriptedModel.toolCalls([{ name: "add", params: { a: 1, b: 2 } }]), ScriptedModel.text("3")]
 *   }],
 *   assertions: [Eval.toolCalled("add", { a: 1, b: 2 })]
 * }))
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const describe = (suite: Eval.Suite, options?: Options | undefined): void => {
  const test = register("describe", options)
  vitest.describe(suite.name, () => {
    for (const testCase of suite.cases) {
      test(testCase.name, () => check(suite, [testCase.name]), options?.timeout)
    }
  })
}

/**
 * Registers one vitest test, named after the suite, that runs every case
 * and fails with the table of the failing cases when one is below the
 * suite's `passRate`.
 *
 * @example
 * ```ts
 * import { Eval } from "@stepwise-agent/testing"
 * import * as EvalVitest from "@stepwise-agent/testing/vitest"
 *
 * declare const suite: Eval.Suite
 * EvalVitest.it(suite, { timeout: 60_000 })
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const it = (suite: Eval.Suite, options?: Options | undefined): void => {
  register("it", options)(suite.name, () => check(suite), options?.timeout)
}
