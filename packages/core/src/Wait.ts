/**
 * A middleware's wait, declared as a tool declares its parameters: the
 * schema of what it asks (its request: the `Interrupted` result's value) and
 * the schema of the answer it takes (its decision: the value `Agent.resume`
 * takes). The agent checks both at the boundary: a request that does not
 * encode fails the run, and a decision that does not fit its schema fails the
 * resume with `AgentError.InvalidResume` before anything runs, with the thread
 * still waiting. The agent's type carries the union of its middleware's waits,
 * so `Interrupted` is typed by what was asked and `resume` by what may answer.
 *
 * @since 0.1.0
 */
import type * as Effect from "effect/Effect"
import type * as Schema from "effect/Schema"

/**
 * What a middleware declares of its wait (`Middleware.make({ wait })`): the
 * schemas of its request and its decision, and optionally a check of a
 * decision against the request it answers (for what a schema cannot say:
 * a decision per call asked about, say). The check runs on the decoded
 * values, before the hook runs again; its failure fails the resume.
 *
 * @example
 * ```ts
 * import { Middleware } from "@stepwise-agent/core"
 * import { Effect, Schema } from "effect"
 *
 * // asks once per run whether to go on; resumed with a boolean
 * const confirm = Middleware.make({
 *   name: "confirm",
 *   wait: { request: Schema.Struct({ question: Schema.String }), decision: Schema.Boolean },
 *   beforeModel: ({ resume }) =>
 *     Effect.succeed(
 *       resume._tag === "Some"
 *         ? (resume.value ? undefined : { jumpTo: "end" as const })
 *         : { interrupt: { question: "Go on?" } }
 *     ),
 *   canJumpTo: ["end"]
 * })
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export interface Wait<Request, Decision, E = never, R = never> {
  /** What the hook interrupts with; stored encoded (it must encode as JSON). */
  readonly request: Schema.Schema<Request, any>
  /** What `Agent.resume` takes; checked by encoding, given to the hook decoded. */
  readonly decision: Schema.Schema<Decision, any>
  /** Checks a decision against the request it answers (optional). */
  readonly check?: ((answer: Answer<Request, Decision>) => Effect.Effect<void, E, R>) | undefined
  /**
   * The decision with each text a person typed in it (a free-text answer, a
   * rejection's reason) replaced by `replace`, everything else as it is
   * (optional). These texts pass the agent's `transformInput` hooks (Pii,
   * …), as the user's input does, before the hook takes the decision
   * (`resume`) and before a durable run stores it (`validateResume`), so no
   * store keeps what a redaction removes. `request` is the request the decision
   * answers (decoded; `undefined` when the stored one does not decode).
   */
  readonly personTexts?:
    | ((decision: Decision, replace: (text: string) => string, request: Request | undefined) => Decision)
    | undefined
}

/**
 * What a wait's `check` sees: the thread, the request it waits on (as
 * stored, decoded) and the decision given.
 *
 * @since 0.1.0
 * @category models
 */
export interface Answer<Request, Decision> {
  readonly threadId: string
  readonly request: Request
  readonly decision: Decision
}

/**
 * What the types know of one middleware's wait: its name, its request and
 * its decision. An agent's waits are the union of its middleware's.
 *
 * @example
 * ```ts
 * import type { Wait } from "@stepwise-agent/core"
 *
 * type Confirm = Wait.Declared<"confirm", { readonly question: string }, boolean>
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export interface Declared<Name extends string = string, Request = unknown, Decision = unknown> {
  readonly middleware: Name
  readonly request: Request
  readonly decision: Decision
}

/**
 * Any wait: the default of an agent whose middleware is not known.
 *
 * @since 0.1.0
 * @category utility types
 */
export type Any = Declared<string, unknown, unknown>

/**
 * What an interrupted run waits for, one member per wait of `W`,
 * discriminated by `middleware`: the middleware that interrupted, the request
 * it interrupted with, and the name of the wait (unique within its run).
 *
 * @example
 * ```ts
 * import type { Wait } from "@stepwise-agent/core"
 *
 * type Confirm = Wait.Declared<"confirm", { readonly question: string }, boolean>
 * const ask = (interrupt: Wait.Interrupt<Confirm>) => interrupt.value.question
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export type Interrupt<W extends Any = Any> = W extends Any ? {
    readonly middleware: W["middleware"]
    readonly value: W["request"]
    /** The name of the wait, unique within its run (see `Middleware.HookResult.interruptKey`). */
    readonly key: string
  }
  : never

/**
 * What may answer one of the waits `W`: the union of their decisions.
 *
 * @example
 * ```ts
 * import type { Wait } from "@stepwise-agent/core"
 *
 * type Confirm = Wait.Declared<"confirm", { readonly question: string }, boolean>
 * const yes: Wait.DecisionOf<Confirm> = true
 * ```
 *
 * @since 0.1.0
 * @category utility types
 */
export type DecisionOf<W extends Any> = W["decision"]

/**
 * The waits `W` as a middleware named `Name` declares them (what
 * `Middleware.withName` does to the type).
 *
 * @since 0.1.0
 * @category utility types
 */
export type Renamed<W extends Any, Name extends string> = W extends Any ? Declared<Name, W["request"], W["decision"]>
  : never
