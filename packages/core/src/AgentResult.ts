/**
 * How a run ended: `Completed`, or `Interrupted` while a middleware waits for
 * a decision (an approval, say) that `Agent.resume` delivers.
 *
 * @since 0.1.0
 */
import type * as Prompt from "@effect/ai/Prompt"
import * as Data from "effect/Data"
import type * as Option from "effect/Option"
import type * as AgentState from "./AgentState.js"
import type * as Usage from "./Usage.js"

/**
 * What an interrupted run waits for: the middleware that interrupted and the
 * value it interrupted with (for human-in-the-loop, the action requests).
 *
 * @since 0.1.0
 * @category models
 */
export interface Interrupt {
  readonly middleware: string
  readonly value: unknown
  /** The name of the wait, unique within its run (see `Middleware.HookResult.interruptKey`). */
  readonly key: string
}

/**
 * How a run ended, typed by the agent's state `S` and its structured output
 * `O` (the type of its `responseFormat`; `never` without one).
 *
 * @since 0.1.0
 * @category models
 */
export type AgentResult<S = AgentState.AgentState, O = unknown> = Data.TaggedEnum<{
  /** The run finished: the model answered without tool calls, or a middleware jumped to the end. */
  Completed: {
    readonly threadId: string
    readonly state: S
    /** The last assistant message's text. */
    readonly text: string
    /** The structured output, decoded with the agent's `responseFormat`; `None` without one. */
    readonly output: Option.Option<O>
    readonly usage: Usage.Usage
    /** Model calls made by this run. */
    readonly steps: number
  }
  /** The run stopped to wait; the thread is checkpointed and resumes with `Agent.resume`. */
  Interrupted: {
    readonly threadId: string
    readonly state: S
    readonly interrupt: Interrupt
    readonly usage: Usage.Usage
    readonly steps: number
  }
}>

interface AgentResultDefinition extends Data.TaggedEnum.WithGenerics<2> {
  readonly taggedEnum: AgentResult<this["A"], this["B"]>
}

const constructors = Data.taggedEnum<AgentResultDefinition>()

/**
 * @since 0.1.0
 * @category constructors
 */
export const Completed = constructors.Completed

/**
 * @since 0.1.0
 * @category constructors
 */
export const Interrupted = constructors.Interrupted

/**
 * Matches on a result.
 *
 * @since 0.1.0
 * @category pattern matching
 */
export const $match = constructors.$match

/**
 * @since 0.1.0
 * @category guards
 */
export const $is = constructors.$is

/**
 * The text of the last assistant message of a conversation.
 *
 * @example
 * ```ts
 * import { AgentResult } from "@stepwise-agent/core"
 * import { Prompt } from "@effect/ai"
 *
 * const text = AgentResult.lastText(Prompt.make([{ role: "assistant", content: "hi" }]).content)
 * ```
 *
 * @since 0.1.0
 * @category utility
 */
export const lastText = (messages: ReadonlyArray<Prompt.Message>): string => {
  for (let i = messages.length - 1; i >= 0; i--) {
    const message = messages[i]!
    if (message.role === "assistant") {
      let text = ""
      for (const part of message.content) if (part.type === "text") text += part.text
      return text
    }
  }
  return ""
}
