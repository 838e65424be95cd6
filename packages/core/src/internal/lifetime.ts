/**
 * An agent's lifetime: open until the scope it was built in closes, or until
 * a run finds that a service it kept from that context was released (a
 * provider layer given with `Effect.provide` around `Agent.make` alone is
 * released as soon as `make` ends). A closed agent fails every operation
 * that runs it with `AgentClosed`, saying why, instead of failing deep inside
 * a provider or answering a `send` as started.
 */
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Predicate from "effect/Predicate"
import type * as Scope from "effect/Scope"
import { AgentClosed } from "../AgentError.js"

/** Whether an agent is open, and why not once it is closed. */
export interface Lifetime {
  closedBecause: string | undefined
}

/**
 * The lifetime of an agent, closed when the scope it is made in closes (an
 * agent built outside any scope gets one that never closes: then only a
 * released service closes it).
 */
export const make: Effect.Effect<Lifetime, never, Scope.Scope> = Effect.suspend(() => {
  const lifetime: Lifetime = { closedBecause: undefined }
  return Effect.as(
    Effect.addFinalizer(() =>
      Effect.sync(() => {
        lifetime.closedBecause ??= "the scope it was built in (Agent.layer's, or the Scope of the effect " +
          "that ran Agent.make) has closed"
      })
    ),
    lifetime
  )
})

/** `AgentClosed`, saying why, once the agent is closed; `undefined` while it is open. */
export const closedError = (lifetime: Lifetime): AgentClosed | undefined =>
  lifetime.closedBecause === undefined ? undefined : new AgentClosed({ reason: lifetime.closedBecause })

/** Succeeds while the agent is open; fails with `AgentClosed`, saying why, once it is closed. */
export const ensureOpen = (lifetime: Lifetime): Effect.Effect<void, AgentClosed> =>
  Effect.suspend(() => {
    const closed = closedError(lifetime)
    return closed === undefined ? Effect.void : Effect.fail(closed)
  })

/**
 * Whether `error`, or an error it was caused by, is an HTTP client's refusal
 * to send because it was destroyed (undici's `ClientDestroyedError`, which
 * `NodeHttpClient.layerUndici` causes when its layer is released).
 */
const isReleasedClient = (error: unknown): boolean => {
  for (let current = error, depth = 0; Predicate.isObject(current) && depth < 8; depth++) {
    if (
      (Predicate.hasProperty(current, "code") && current.code === "UND_ERR_DESTROYED") ||
      (Predicate.hasProperty(current, "name") && current.name === "ClientDestroyedError")
    ) return true
    current = Predicate.hasProperty(current, "cause") ? current.cause : undefined
  }
  return false
}

/**
 * The failure of a run as the agent reports it: a failure caused by a
 * released HTTP client closes the agent and becomes `AgentClosed`, naming
 * the likely cause; any other stays as it is.
 */
export const closeOnRelease = <E>(lifetime: Lifetime, cause: Cause.Cause<E>): Cause.Cause<E | AgentClosed> => {
  const failure = Cause.failureOption(cause)
  if (Option.isNone(failure) || !isReleasedClient(failure.value)) return cause
  lifetime.closedBecause ??= "a service it kept from the context it was built in has been released (an HTTP " +
    "client refused to send: ClientDestroyedError). A layer given with Effect.provide around Agent.make alone " +
    "is released as soon as make ends; provide it to the program that uses the agent, or build the agent " +
    "with Agent.layer and Layer.provide"
  return Cause.fail(new AgentClosed({ reason: lifetime.closedBecause }))
}
