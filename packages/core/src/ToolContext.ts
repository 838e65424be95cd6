/**
 * What a tool handler may know about the call it serves: the call id, the
 * tool and the thread, and an idempotency key. A call cut off by a crash runs
 * again in a durable run, so a tool that writes should pass the key to the
 * system it writes to (or check it itself) to write once.
 *
 * @since 0.1.0
 */
import type * as Cause from "effect/Cause"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"

/**
 * The call a tool handler serves.
 *
 * @since 0.1.0
 * @category models
 */
export interface ToolContext {
  readonly callId: string
  readonly toolName: string
  readonly threadId: string
  /**
   * Stable across retries and crash recovery of the same call:
   * `threadId/callId`, or what an idempotent tool's `ToolEffect` derives from
   * the arguments (see `ToolEffect.idempotencyKey`).
   */
  readonly idempotencyKey: string
}

/**
 * The call being served: a context reference the agent sets for each tool
 * handler it runs.
 *
 * @since 0.1.0
 * @category references
 */
export class CurrentToolContext extends Context.Reference<CurrentToolContext>()(
  "@stepwise-agent/core/ToolContext/CurrentToolContext",
  { defaultValue: () => Option.none<ToolContext>() }
) {}

/**
 * The call a tool handler serves; fails with `NoSuchElementException` outside
 * a tool call of an agent.
 *
 * @example
 * ```ts
 * import { ToolContext } from "@stepwise-agent/core"
 * import { Effect } from "effect"
 *
 * // inside a handler of a tool that writes
 * const handler = (params: { readonly text: string }) =>
 *   Effect.gen(function*() {
 *     const { idempotencyKey } = yield* ToolContext.current
 *     return `wrote ${params.text} once, under ${idempotencyKey}`
 *   })
 * ```
 *
 * @since 0.1.0
 * @category accessors
 */
export const current: Effect.Effect<ToolContext, Cause.NoSuchElementException> = Effect.flatten(CurrentToolContext)

/**
 * The context of a call of `toolName` on `threadId`; its idempotency key is
 * `threadId/callId` unless given.
 *
 * @example
 * ```ts
 * import { ToolContext } from "@stepwise-agent/core"
 *
 * ToolContext.make("call_1", "refund", "ticket-42").idempotencyKey // "ticket-42/call_1"
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (callId: string, toolName: string, threadId: string, idempotencyKey?: string): ToolContext => ({
  callId,
  toolName,
  threadId,
  idempotencyKey: idempotencyKey ?? `${threadId}/${callId}`
})
