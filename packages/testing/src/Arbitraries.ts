/**
 * fast-check arbitraries of well-formed conversations, for property tests of
 * context policies (edits, trimming, summarization) and middleware.
 *
 * A generated conversation is a list of `Prompt.Message`s as the agent loop
 * builds them: an optional system message first, then turns. A turn is a user
 * message, then assistant steps that call tools — each step's calls are
 * answered, in order, by tool results in the tool message(s) that follow it,
 * paired by id — and, sometimes, a final assistant answer. Tool-call ids are
 * unique (`call_0`, `call_1`, …). `@effect/ai`'s own `Arbitrary.make(Prompt)`
 * makes random transcripts with orphan results; these never have one.
 *
 * @since 0.1.0
 */
import * as Prompt from "@effect/ai/Prompt"
import * as FastCheck from "effect/FastCheck"
import { keysOf, unknownKey } from "./internal/options.js"

/**
 * The tool names used when none are given.
 *
 * @since 0.1.0
 * @category constructors
 */
export const defaultToolNames: ReadonlyArray<string> = ["search", "read_file", "run_code", "fetch_url"]

/**
 * Options of {@link conversation}. Invalid options (an empty tool list, a
 * minimum above its maximum, a key it does not know) throw when the arbitrary is built, as
 * fast-check's own constructors do.
 *
 * @since 0.1.0
 * @category models
 */
export interface ConversationOptions {
  /** Names the tool calls use (default {@link defaultToolNames}). */
  readonly toolNames?: ReadonlyArray<string> | undefined
  /** Whether the conversation starts with a system message (default `"sometimes"`). */
  readonly system?: "always" | "never" | "sometimes" | undefined
  /** Fewest user turns (default 1). */
  readonly minTurns?: number | undefined
  /** Most user turns (default 5). */
  readonly maxTurns?: number | undefined
  /** Most tool-calling assistant steps in one turn (default 3). */
  readonly maxSteps?: number | undefined
  /** Most tool calls in one assistant step (default 3). */
  readonly maxCallsPerStep?: number | undefined
  /** Fewest characters of text in a tool result's payload (default 0). */
  readonly minResultSize?: number | undefined
  /** Most characters of text in a tool result's payload (default 200). */
  readonly maxResultSize?: number | undefined
}

/**
 * A tool name from a list (default {@link defaultToolNames}).
 *
 * @example
 * ```ts
 * import { Arbitraries } from "@stepwise-agent/testing"
 * import { FastCheck } from "effect"
 *
 * const names = FastCheck.sample(Arbitraries.toolName(["a", "b"]), 3)
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const toolName = (names: ReadonlyArray<string> = defaultToolNames): FastCheck.Arbitrary<string> => {
  if (names.length === 0) throw new Error("Arbitraries.toolName: the list of tool names is empty")
  return FastCheck.constantFrom(...names)
}

const words = [
  "the",
  "agent",
  "reads",
  "a",
  "file",
  "and",
  "finds",
  "42",
  "results",
  "for",
  "query",
  "error:",
  "ok",
  "{\"k\":1}",
  "naïve",
  "日本",
  "line\n",
  "  "
]

const wordText = (min: number, max: number): FastCheck.Arbitrary<string> =>
  FastCheck.tuple(
    FastCheck.integer({ min, max }),
    FastCheck.array(FastCheck.constantFrom(...words), { minLength: 1, maxLength: 6 })
  ).map(([length, chosen]) => {
    if (length === 0) return ""
    const unit = chosen.join(" ") + " "
    return unit.repeat(Math.ceil(length / unit.length)).slice(0, length)
  })

const shortText = FastCheck.oneof(
  wordText(1, 40),
  FastCheck.string({ minLength: 1, maxLength: 20 })
)

/**
 * A tool result's payload: a string, or a JSON object holding one, whose text
 * has between `min` and `max` characters.
 *
 * @example
 * ```ts
 * import { Arbitraries } from "@stepwise-agent/testing"
 * import { FastCheck } from "effect"
 *
 * const payloads = FastCheck.sample(Arbitraries.resultPayload(2000, 2000), 2)
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const resultPayload = (min = 0, max = 200): FastCheck.Arbitrary<unknown> => {
  if (!(Number.isInteger(min) && Number.isInteger(max) && 0 <= min && min <= max)) {
    throw new Error(`Arbitraries.resultPayload: need whole numbers 0 <= min <= max, got ${min} and ${max}`)
  }
  const text = wordText(min, max)
  return FastCheck.oneof(
    text,
    FastCheck.tuple(text, FastCheck.nat({ max: 1000 }), FastCheck.boolean()).map(([content, count, truncated]) => ({
      content,
      count,
      truncated
    }))
  )
}

interface CallSpec {
  readonly name: string
  readonly params: { readonly query: string; readonly limit: number }
  readonly result: unknown
  readonly isFailure: boolean
  /** Starts a new tool message before this call's result. */
  readonly split: boolean
}

interface StepSpec {
  readonly reasoning: string | undefined
  readonly text: string | undefined
  readonly calls: ReadonlyArray<CallSpec>
}

interface TurnSpec {
  readonly user: string
  readonly steps: ReadonlyArray<StepSpec>
  readonly answer: string | undefined
}

const conversationKeys = keysOf<ConversationOptions>({
  toolNames: true,
  system: true,
  minTurns: true,
  maxTurns: true,
  maxSteps: true,
  maxCallsPerStep: true,
  minResultSize: true,
  maxResultSize: true
})

const checkRange = (label: string, min: number, max: number, floor: number) => {
  if (!(Number.isInteger(min) && Number.isInteger(max) && floor <= min && min <= max)) {
    throw new Error(
      `Arbitraries.conversation: need whole numbers ${floor} <= ${label} min <= max, got ${min} and ${max}`
    )
  }
}

/**
 * Well-formed conversations (see the module description), as the message
 * list of a `Prompt`.
 *
 * @example
 * ```ts
 * import { Arbitraries } from "@stepwise-agent/testing"
 * import { FastCheck } from "effect"
 *
 * const conversations = FastCheck.sample(
 *   Arbitraries.conversation({ toolNames: ["search"], maxResultSize: 2000 }),
 *   5
 * )
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const conversation = (
  options?: ConversationOptions
): FastCheck.Arbitrary<ReadonlyArray<Prompt.Message>> => {
  const unknown = unknownKey("Arbitraries", options, conversationKeys)
  if (unknown !== undefined) throw new Error(`Arbitraries.conversation: ${unknown.option} ${unknown.reason}`)
  const minTurns = options?.minTurns ?? 1
  const maxTurns = options?.maxTurns ?? 5
  const maxSteps = options?.maxSteps ?? 3
  const maxCalls = options?.maxCallsPerStep ?? 3
  const minResult = options?.minResultSize ?? 0
  const maxResult = options?.maxResultSize ?? 200
  checkRange("turns", minTurns, maxTurns, 0)
  checkRange("steps", 0, maxSteps, 0)
  checkRange("calls per step", 1, maxCalls, 1)
  checkRange("result size", minResult, maxResult, 0)
  const name = toolName(options?.toolNames ?? defaultToolNames)
  const call: FastCheck.Arbitrary<CallSpec> = FastCheck.record({
    name,
    params: FastCheck.record({ query: shortText, limit: FastCheck.nat({ max: 100 }) }),
    result: resultPayload(minResult, maxResult),
    isFailure: FastCheck.boolean(),
    split: FastCheck.boolean()
  })
  const step: FastCheck.Arbitrary<StepSpec> = FastCheck.record({
    reasoning: FastCheck.option(shortText, { nil: undefined, freq: 3 }),
    text: FastCheck.option(shortText, { nil: undefined }),
    calls: FastCheck.array(call, { minLength: 1, maxLength: maxCalls })
  })
  const turn: FastCheck.Arbitrary<TurnSpec> = FastCheck.record({
    user: shortText,
    steps: FastCheck.array(step, { maxLength: maxSteps }),
    answer: FastCheck.option(shortText, { nil: undefined })
  })
  const systemMode = options?.system ?? "sometimes"
  const system: FastCheck.Arbitrary<string | undefined> = systemMode === "never"
    ? FastCheck.constant(undefined)
    : systemMode === "always"
    ? shortText
    : FastCheck.option(shortText, { nil: undefined })
  return FastCheck.tuple(system, FastCheck.array(turn, { minLength: minTurns, maxLength: maxTurns })).map(
    ([systemText, turns]) => build(systemText, turns)
  )
}

const build = (systemText: string | undefined, turns: ReadonlyArray<TurnSpec>): ReadonlyArray<Prompt.Message> => {
  const messages: Array<Prompt.Message> = []
  if (systemText !== undefined) messages.push(Prompt.makeMessage("system", { content: systemText }))
  let nextId = 0
  for (const turn of turns) {
    messages.push(Prompt.makeMessage("user", { content: [Prompt.makePart("text", { text: turn.user })] }))
    for (const step of turn.steps) {
      const content: Array<Prompt.AssistantMessagePart> = []
      if (step.reasoning !== undefined) content.push(Prompt.makePart("reasoning", { text: step.reasoning }))
      if (step.text !== undefined) content.push(Prompt.makePart("text", { text: step.text }))
      const results: Array<Array<Prompt.ToolResultPart>> = []
      for (const spec of step.calls) {
        const id = `call_${nextId++}`
        content.push(Prompt.makePart("tool-call", {
          id,
          name: spec.name,
          params: spec.params,
          providerExecuted: false
        }))
        const result = Prompt.makePart("tool-result", {
          id,
          name: spec.name,
          result: spec.result,
          isFailure: spec.isFailure,
          providerExecuted: false
        })
        if (results.length === 0 || spec.split) results.push([result])
        else results[results.length - 1]!.push(result)
      }
      messages.push(Prompt.makeMessage("assistant", { content }))
      for (const group of results) messages.push(Prompt.makeMessage("tool", { content: group }))
    }
    if (turn.answer !== undefined) {
      messages.push(Prompt.makeMessage("assistant", { content: [Prompt.makePart("text", { text: turn.answer })] }))
    }
  }
  return messages
}

/**
 * What is wrong with a conversation, as a provider would see it; empty when
 * it is well-formed. Checked: tool-call ids are unique; every tool call the
 * agent runs (not provider-executed) is answered by exactly one tool result,
 * with the same name, in the tool messages that directly follow its assistant
 * message; every tool result answers such a call; tool messages hold only
 * tool results.
 *
 * @example
 * ```ts
 * import { Arbitraries } from "@stepwise-agent/testing"
 * import { Prompt } from "@effect/ai"
 *
 * const orphan = Prompt.makeMessage("tool", {
 *   content: [Prompt.makePart("tool-result", { id: "x", name: "search", result: 1, isFailure: false, providerExecuted: false })]
 * })
 * Arbitraries.problems([orphan]) // ['tool result "x" (search) answers no call of the assistant message before it']
 * ```
 *
 * @since 0.1.0
 * @category guards
 */
export const problems = (messages: ReadonlyArray<Prompt.Message>): ReadonlyArray<string> => {
  const found: Array<string> = []
  const callIds = new Set<string>()
  /** Calls of the last assistant message still waiting for their result. */
  let open = new Map<string, string>()
  /** Calls of the last assistant message already answered. */
  let answered = new Set<string>()
  /** Whether tool messages may follow (the previous message was an assistant or tool message). */
  let inToolRun = false
  const close = () => {
    for (const [id, name] of open) found.push(`tool call "${id}" (${name}) has no result`)
    open = new Map()
    answered = new Set()
  }
  for (const message of messages) {
    switch (message.role) {
      case "system":
      case "user": {
        close()
        inToolRun = false
        break
      }
      case "assistant": {
        close()
        inToolRun = true
        for (const part of message.content) {
          if (part.type !== "tool-call") continue
          if (callIds.has(part.id)) found.push(`tool call id "${part.id}" is used twice`)
          callIds.add(part.id)
          if (!part.providerExecuted) open.set(part.id, part.name)
        }
        break
      }
      case "tool": {
        for (const part of message.content) {
          if (part.type !== "tool-result") {
            found.push(`a tool message holds a ${(part as Prompt.Part).type} part`)
            continue
          }
          const name = open.get(part.id)
          if (inToolRun && name !== undefined) {
            if (name !== part.name) {
              found.push(`tool result "${part.id}" is named ${part.name} but its call is named ${name}`)
            }
            open.delete(part.id)
            answered.add(part.id)
          } else if (inToolRun && answered.has(part.id)) {
            found.push(`tool call "${part.id}" has two results`)
          } else {
            found.push(`tool result "${part.id}" (${part.name}) answers no call of the assistant message before it`)
          }
        }
        break
      }
    }
  }
  close()
  return found
}

/**
 * Whether a conversation is well-formed: no orphan tool call or result (see
 * {@link problems}).
 *
 * @example
 * ```ts
 * import { Arbitraries } from "@stepwise-agent/testing"
 * import { FastCheck } from "effect"
 *
 * FastCheck.assert(FastCheck.property(Arbitraries.conversation(), Arbitraries.wellFormed))
 * ```
 *
 * @since 0.1.0
 * @category guards
 */
export const wellFormed = (messages: ReadonlyArray<Prompt.Message>): boolean => problems(messages).length === 0
