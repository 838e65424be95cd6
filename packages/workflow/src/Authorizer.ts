/**
 * Who may answer a waiting durable run. A workflow's wait is named after its
 * run and key, so anyone who can reach the engine could complete it: every
 * decision of `AgentWorkflow.resume` goes through the `Authorizer` of the
 * context first, and fails with {@link Unauthorized} when it refuses.
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"

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
 * What a decision asks to do, for the {@link Authorizer}.
 *
 * @since 0.1.0
 * @category models
 */
export interface DecisionRequest {
  readonly runId: string
  readonly threadId: string
  /** Who decides, as the app identified them. */
  readonly principal: string
  readonly pending: { readonly key: string; readonly middleware: string; readonly value: unknown }
  readonly value: unknown
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
 * An {@link Authorizer} from a predicate.
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
export const layer = (
  allow: (request: DecisionRequest) => boolean | Effect.Effect<boolean>
): Layer.Layer<Authorizer> =>
  Layer.succeed(Authorizer, {
    authorize: (request) => {
      const allowed = allow(request)
      return Effect.flatMap(Effect.isEffect(allowed) ? allowed : Effect.succeed(allowed), (ok) =>
        ok ? Effect.void : Effect.fail(
          new Unauthorized({ runId: request.runId, principal: request.principal, reason: "refused by the authorizer" })
        ))
    }
  })
