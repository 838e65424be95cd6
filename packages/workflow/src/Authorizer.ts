/**
 * Who may answer a waiting durable run. A workflow's wait is named after its
 * run and key, so anyone who can reach the engine could complete it: every
 * decision of `AgentWorkflow.resume` goes through the `Authorizer` of the
 * context first, and fails with {@link Unauthorized} when it refuses.
 *
 * @since 0.1.0
 */
import type * as Agent from "@stepwise-agent/core/Agent"
import type * as Wait from "@stepwise-agent/core/Wait"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import type * as AgentWorkflow from "./AgentWorkflow.js"

// -----------------------------------------------------------------------------
// errors
// -----------------------------------------------------------------------------

/**
 * The app's {@link Authorizer} refused a decision: the run keeps waiting.
 *
 * @since 0.1.0
 * @category errors
 */
export class Unauthorized extends Schema.TaggedError<Unauthorized>(
  "@stepwise-agent/workflow/Authorizer/Unauthorized"
)("Unauthorized", { runId: Schema.String, principal: Schema.String, reason: Schema.String }) {
  /**
   * @since 0.1.0
   */
  override get message(): string {
    return `"${this.principal}" may not decide for run "${this.runId}": ${this.reason}`
  }
}

// -----------------------------------------------------------------------------
// models
// -----------------------------------------------------------------------------

/**
 * What a decision asks to do, for the {@link Authorizer}, typed by the
 * agent's waits `W` (see `AgentWorkflow.WaitsOf`): what the run waits for
 * (`pending`: the middleware, its request as the hook gave it, the wait's
 * key) and the decision given (`value`, as `AgentWorkflow.resume` took it:
 * one of the agent's decisions; it is checked against the pending wait only
 * once the authorizer allows it, so a refusal tells nothing of the wait).
 *
 * @example
 * ```ts
 * import type { Wait } from "@stepwise-agent/core"
 * import type { Authorizer } from "@stepwise-agent/workflow"
 *
 * type Confirm = Wait.Declared<"confirm", { readonly amount: number }, boolean>
 * const small = (request: Authorizer.DecisionRequest<Confirm>) => request.pending.value.amount < 100
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export interface DecisionRequest<W extends Wait.Any = Wait.Any> {
  readonly runId: string
  readonly threadId: string
  /** Who decides, as the app identified them. */
  readonly principal: string
  readonly pending: Wait.Interrupt<W>
  readonly value: Wait.DecisionOf<W>
}

/**
 * Decides who may answer a waiting run: every decision of
 * `AgentWorkflow.resume` goes through this service first.
 *
 * @example
 * ```ts
 * import { Authorizer } from "@stepwise-agent/workflow"
 * import { Effect } from "effect"
 *
 * // staff may decide, and only for runs of their own tickets
 * const StaffOnly = Effect.succeed(Authorizer.Authorizer.of({
 *   authorize: (request) =>
 *     request.principal.startsWith("staff:") && request.threadId.startsWith("ticket-")
 *       ? Effect.void
 *       : Effect.fail(new Authorizer.Unauthorized({
 *         runId: request.runId,
 *         principal: request.principal,
 *         reason: "only staff decide for tickets"
 *       }))
 * }))
 * ```
 *
 * @since 0.1.0
 * @category tags
 */
export class Authorizer extends Context.Tag("@stepwise-agent/workflow/Authorizer")<
  Authorizer,
  { readonly authorize: (request: DecisionRequest) => Effect.Effect<void, Unauthorized> }
>() {}

/**
 * An {@link Authorizer} for the runs of the agent type `A` (as
 * `AgentWorkflow.make<A>` is made for): `authorize` sees the decision typed
 * by the agent's waits. Without `A`, any wait and any decision.
 *
 * @example
 * ```ts
 * import type { Agent, AgentState, Wait } from "@stepwise-agent/core"
 * import { Authorizer } from "@stepwise-agent/workflow"
 * import { Effect } from "effect"
 *
 * type Refunds = Agent.Service<AgentState.AgentState, never, unknown, Wait.Declared<"refund", { readonly amount: number }, boolean>>
 *
 * // anyone may refuse a refund; only managers approve one over 100
 * const RefundPolicy = Authorizer.make<Refunds>((request) =>
 *   request.value || request.pending.value.amount <= 100 || request.principal.startsWith("manager:")
 *     ? Effect.void
 *     : Effect.fail(new Authorizer.Unauthorized({
 *       runId: request.runId,
 *       principal: request.principal,
 *       reason: "only managers approve refunds over 100"
 *     })))
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = <A extends AgentWorkflow.AnyAgent = Agent.Service>(
  authorize: (request: DecisionRequest<AgentWorkflow.WaitsOf<A>>) => Effect.Effect<void, Unauthorized>
): Context.Tag.Service<Authorizer> =>
  // the `Agent` of the context is the one `A` names, as `AgentWorkflow.make<A>` takes it to be: its waits are `A`'s
  Authorizer.of({ authorize: authorize as (request: DecisionRequest) => Effect.Effect<void, Unauthorized> })

/**
 * An {@link Authorizer} from a predicate, typed by the agent type `A` as
 * {@link make} is.
 *
 * @example
 * ```ts
 * import { Authorizer } from "@stepwise-agent/workflow"
 *
 * const AdminsOnly = Authorizer.layer((request) => request.principal.startsWith("admin:"))
 * ```
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = <A extends AgentWorkflow.AnyAgent = Agent.Service>(
  allow: (request: DecisionRequest<AgentWorkflow.WaitsOf<A>>) => boolean | Effect.Effect<boolean>
): Layer.Layer<Authorizer> =>
  Layer.succeed(
    Authorizer,
    make<A>((request) => {
      const allowed = allow(request)
      return Effect.flatMap(Effect.isEffect(allowed) ? allowed : Effect.succeed(allowed), (ok) =>
        ok ? Effect.void : Effect.fail(
          new Unauthorized({ runId: request.runId, principal: request.principal, reason: "refused by the authorizer" })
        ))
    })
  )
