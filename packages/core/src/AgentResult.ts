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
import type * as Wait from "./Wait.js"

/**
 * What an interrupted run waits for, one member per wait of `W`: the
 * middleware that interrupted and the request it interrupted with (for
 * human-in-the-loop, the action requests), typed by its `wait.request`.
 *
 * @since 0.1.0
 * @category models
 */
export type Interrupt<W extends Wait.Any = Wait.Any> = Wait.Interrupt<W>

/**
 * How a run ended, typed by the agent's state `S`, its structured output
 * `O` (the type of its `responseFormat`; `never` without one) and its waits
 * `W` (the union of its middleware's, see `Wait`).
 *
 * @since 0.1.0
 * @category models
 */
export type AgentResult<S = AgentState.AgentState, O = unknown, W extends Wait.Any = Wait.Any> = Variants<
  S,
  O,
  Wait.Interrupt<W>
>

/**
 * The results typed by the interrupt itself, `I` (an {@link AgentResult}'s is
 * `Wait.Interrupt<W>`): what the constructors infer from their argument.
 *
 * @since 0.1.0
 * @category models
 */
export type Variants<S, O, I> = Data.TaggedEnum<{
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
    readonly interrupt: I
    readonly usage: Usage.Usage
    readonly steps: number
  }
}>

interface AgentResultDefinition extends Data.TaggedEnum.WithGenerics<3> {
  readonly taggedEnum: Variants<this["A"], this["B"], this["C"]>
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
