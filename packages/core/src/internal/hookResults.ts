import * as Effect from "effect/Effect"
import { InvalidHookResult } from "../AgentError.js"
import type * as Middleware from "../Middleware.js"
import * as JsonDepth from "./jsonDepth.js"
import * as ToolResult from "./toolResult.js"

/**
 * Cheap shape checks of what hooks return, so a wrong value fails the run
 * with an `InvalidHookResult` naming the middleware and hook, not with a
 * TypeError later, far from its cause. A few property checks each: no
 * Schema decode of whole messages.
 */

const isObject = (u: unknown): u is Record<string, unknown> => typeof u === "object" && u !== null && !Array.isArray(u)

/** How a wrong value reads in an error: its kind, and short values themselves. */
export const describeValue = (u: unknown): string =>
  u === null
    ? "null"
    : Array.isArray(u)
    ? "an array"
    : Effect.isEffect(u)
    ? "an Effect"
    : typeof u === "string"
    ? `the string ${JSON.stringify(u.length > 40 ? `${u.slice(0, 40)}…` : u)}`
    : typeof u === "number" || typeof u === "boolean"
    ? `the ${typeof u} ${u}`
    : typeof u === "object"
    ? "an object"
    : typeof u

const roles = new Set(["system", "user", "assistant", "tool"])

const isMessage = (u: unknown): boolean =>
  isObject(u) && typeof u.role === "string" && roles.has(u.role) &&
  (u.role === "system" ? typeof u.content === "string" : Array.isArray(u.content))

/**
 * What is wrong with a node hook's result, or `undefined`. Messages the hook
 * kept from `current` (same reference, same place) are not checked again;
 * the tool results of the others are checked as a tool's result is (depth,
 * `bigint`, cycles), so none reaches a store that cannot write it.
 */
export const nodeResultProblem = (result: unknown, current: ReadonlyArray<unknown>): string | undefined => {
  if (result === undefined) return undefined
  if (!isObject(result) || Effect.isEffect(result)) {
    return `returned ${describeValue(result)}${
      Effect.isEffect(result) ? " inside its Effect (flatMap it instead of map)" : ""
    }, not undefined or a HookResult object`
  }
  const { interruptKey, jumpTo, messages, state } = result
  if (state !== undefined && !isObject(state)) return `its state update is ${describeValue(state)}, not an object`
  if (messages !== undefined) {
    if (!Array.isArray(messages)) return `its messages are ${describeValue(messages)}, not an array of messages`
    for (let i = 0; i < messages.length; i++) {
      if (messages[i] === current[i]) continue
      if (!isMessage(messages[i])) return `its message ${i} is ${describeValue(messages[i])}, not a Prompt message`
      const stored = toolResultsProblem((messages[i] as { readonly content: unknown }).content)
      if (stored !== undefined) return `its message ${i}: ${stored}`
    }
  }
  if (jumpTo !== undefined && typeof jumpTo !== "string") return `its jumpTo is ${describeValue(jumpTo)}`
  if (interruptKey !== undefined && typeof interruptKey !== "string") {
    return `its interruptKey is ${describeValue(interruptKey)}, not a string`
  }
  return undefined
}

/** What keeps a tool result among a message's parts from being kept (as a tool's would be), or `undefined`. */
const toolResultsProblem = (content: unknown): string | undefined => {
  if (!Array.isArray(content)) return undefined
  for (const part of content) {
    if (isObject(part) && part.type === "tool-result") {
      const problem = ToolResult.problem(part.result, "its tool result")
      if (problem !== undefined) return problem
    }
  }
  return undefined
}

/** What is wrong with a `transformInput` result, or `undefined`. */
export const inputProblem = (messages: unknown): string | undefined => {
  if (!Array.isArray(messages)) return `returned ${describeValue(messages)}, not an array of messages`
  for (let i = 0; i < messages.length; i++) {
    if (!isMessage(messages[i])) return `its message ${i} is ${describeValue(messages[i])}, not a Prompt message`
  }
  return undefined
}

/** The calls of a list of parts the agent runs: tool calls the provider did not execute. */
const callsOf = (parts: ReadonlyArray<unknown>): Array<Record<string, unknown>> =>
  parts.filter((part): part is Record<string, unknown> =>
    isObject(part) && part.type === "tool-call" && part.providerExecuted !== true
  )

/** Whether two JSON-like values are equal, key order aside (a value nested past `depth` levels is not). */
const sameValue = (a: unknown, b: unknown, depth: number): boolean => {
  if (a === b) return true
  if (depth === 0 || typeof a !== "object" || typeof b !== "object" || a === null || b === null) return false
  if (Array.isArray(a) !== Array.isArray(b)) return false
  const left = a as Record<string, unknown>
  const right = b as Record<string, unknown>
  const keys = Object.keys(left)
  return keys.length === Object.keys(right).length &&
    keys.every((key) => Object.hasOwn(right, key) && sameValue(left[key], right[key], depth - 1))
}

/**
 * How a response's `toolCalls` differ from the tool calls of its message, or
 * `undefined`. The agent runs the message's calls, so a hook that changed
 * one and not the other (LangChain's `response.tool_calls` is one list) would
 * see its change ignored, or logged and traced as what did not run.
 */
const toolCallsDisagreement = (
  toolCalls: ReadonlyArray<unknown>,
  content: ReadonlyArray<unknown>
): string | undefined => {
  const listed = callsOf(toolCalls)
  const sent = callsOf(content)
  const describe = (calls: ReadonlyArray<Record<string, unknown>>) =>
    calls.length === 0 ? "none" : calls.map((call) => `${String(call.name)} (${String(call.id)})`).join(", ")
  const same = listed.length === sent.length && listed.every((call, i) => {
    const other = sent[i]!
    return call === other ||
      (call.id === other.id && call.name === other.name && sameValue(call.params, other.params, JsonDepth.maxDepth + 1))
  })
  return same ? undefined : `its toolCalls (${describe(listed)}) are not the tool calls of its message ` +
    `(${describe(sent)}): the agent runs the message's, so change both (Middleware.modelResponse builds them together)`
}

/** What is wrong with a `wrapModelCall` result, or `undefined`. */
export const modelResponseProblem = (response: unknown): string | undefined => {
  if (!isObject(response) || Effect.isEffect(response)) {
    return `returned ${describeValue(response)}, not a ModelResponse (see Middleware.modelResponse)`
  }
  const message = response.message
  if (!isObject(message) || message.role !== "assistant" || !Array.isArray(message.content)) {
    return `its message is ${describeValue(message)}, not an assistant message`
  }
  if (!Array.isArray(response.toolCalls)) return `its toolCalls are ${describeValue(response.toolCalls)}, not an array`
  const disagreement = toolCallsDisagreement(response.toolCalls, message.content)
  if (disagreement !== undefined) return disagreement
  if (!isObject(response.usage)) return `its usage is ${describeValue(response.usage)}, not a Response.Usage`
  if (typeof response.finishReason !== "string") {
    return `its finishReason is ${describeValue(response.finishReason)}, not a string`
  }
  if (response.state !== undefined && (!isObject(response.state) || Array.isArray(response.state))) {
    return `its state is ${describeValue(response.state)}, not an object of state keys`
  }
  return undefined
}

/** What is wrong with a `wrapToolCall` result for `call` (a tool result, with an optional state update), or `undefined`. */
export const toolResultProblem = (
  result: unknown,
  call: Middleware.ToolCallRequest["call"]
): string | undefined => {
  if (!isObject(result) || result.type !== "tool-result") {
    return `returned ${describeValue(result)}, not a tool result (see Middleware.toolResult)`
  }
  if (result.id !== call.id) return `its result answers call ${describeValue(result.id)}, not call "${call.id}"`
  if (typeof result.isFailure !== "boolean") return `its isFailure is ${describeValue(result.isFailure)}, not a boolean`
  if (result.state !== undefined && !isObject(result.state)) {
    return `its state is ${describeValue(result.state)}, not an object of state keys`
  }
  return undefined
}

/** Fails with `InvalidHookResult` when `problem` found something, else gives the value. */
export const checked = <A>(
  middleware: string,
  hook: string,
  problem: (value: A) => string | undefined
) =>
(value: A): Effect.Effect<A, InvalidHookResult> => {
  const reason = problem(value)
  return reason === undefined ? Effect.succeed(value) : Effect.fail(new InvalidHookResult({ middleware, hook, reason }))
}

/** The hook's Effect, or an `InvalidHookResult` when the hook returned something else. */
export const hookEffect = <A, E, R>(
  middleware: string,
  hook: string,
  effect: Effect.Effect<A, E, R>
): Effect.Effect<A, E | InvalidHookResult, R> =>
  Effect.isEffect(effect) ? effect : Effect.fail(
    new InvalidHookResult({ middleware, hook, reason: `returned ${describeValue(effect)}, not an Effect` })
  )
