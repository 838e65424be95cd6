/**
 * What a person typed that a hook writes into the thread as a tool result (an
 * approval's free-text answer, a rejection's reason): marked by
 * `Middleware.toolResult(…, { fromPerson: true })`, its texts pass the
 * `transformInput` hooks as the user's input does, right after the hook that
 * wrote it, before any other hook sees it. The mark then says the texts were
 * checked, so a later hook that hands the thread back does not check them
 * twice (a redaction is not always idempotent). An input cannot carry the
 * mark: the key is the agent's own (`input.ts`).
 */
import * as Prompt from "@effect/ai/Prompt"
import * as Effect from "effect/Effect"
import { InvalidHookResult } from "../AgentError.js"

/** The provider options of a person's answer not checked yet, and once checked. */
export const unchecked = { stepwise: { fromPerson: "unchecked" } } as const
const checked = { stepwise: { fromPerson: "checked" } } as const

/** Whether `part` is a person's answer whose texts have not passed the `transformInput` hooks yet. */
const isUnchecked = (part: Prompt.ToolMessagePart): part is Prompt.ToolResultPart =>
  part.type === "tool-result" &&
  (part.options as { readonly stepwise?: { readonly fromPerson?: unknown } }).stepwise?.fromPerson === "unchecked"

/** The texts of a value (a tool result), in a fixed order: every string, however deep. */
const textsOf = (value: unknown, out: Array<string>): Array<string> => {
  if (typeof value === "string") out.push(value)
  else if (Array.isArray(value)) {
    for (const item of value) textsOf(item, out)
  } else if (typeof value === "object" && value !== null) {
    for (const [, item] of Object.entries(value)) textsOf(item, out)
  }
  return out
}

/** `value` with its strings replaced, in the order {@link textsOf} reads them. */
const withTexts = (value: unknown, texts: Array<string>): unknown => {
  if (typeof value === "string") return texts.shift()!
  if (Array.isArray(value)) return value.map((item) => withTexts(item, texts))
  if (typeof value === "object" && value !== null) {
    // (`fromEntries` defines each key as an own one, `__proto__` included, as an assignment would not)
    return Object.fromEntries(Object.entries(value).map(([key, item]) => [key, withTexts(item, texts)]))
  }
  return value
}

/**
 * The thread with every unchecked answer of a person (in the tool messages
 * after the last assistant message: a hook answers calls of the last reply)
 * passed through `transform` (the `transformInput` hooks) as one user
 * message per text, and marked checked; the thread itself when there is
 * none. When the hooks give back other than one user message per text, the
 * run fails with `InvalidHookResult`, naming the hook that wrote the answer.
 */
export const check = <E, R>(
  messages: ReadonlyArray<Prompt.Message>,
  middleware: string,
  hook: string,
  transform: (messages: ReadonlyArray<Prompt.Message>) => Effect.Effect<ReadonlyArray<Prompt.Message>, E, R>
): Effect.Effect<ReadonlyArray<Prompt.Message>, E | InvalidHookResult, R> => {
  let first = messages.length
  while (first > 0 && messages[first - 1]!.role === "tool") first--
  const answers: Array<{ readonly message: number; readonly part: number; readonly texts: Array<string> }> = []
  for (let i = first; i < messages.length; i++) {
    const content = (messages[i] as Prompt.ToolMessage).content
    for (let j = 0; j < content.length; j++) {
      const part = content[j]!
      if (isUnchecked(part)) answers.push({ message: i, part: j, texts: textsOf(part.result, []) })
    }
  }
  if (answers.length === 0) return Effect.succeed(messages)
  return Effect.map(throughInput(answers.flatMap((answer) => answer.texts), middleware, hook, transform), (texts) => {
    const out = messages.slice()
    for (const answer of answers) {
      const message = out[answer.message] as Prompt.ToolMessage
      const content = message.content.slice()
      const part = content[answer.part] as Prompt.ToolResultPart
      content[answer.part] = checkedPart(part, texts.splice(0, answer.texts.length))
      out[answer.message] = Prompt.makeMessage("tool", { content, options: message.options })
    }
    return out
  })
}

/**
 * One tool result, {@link check}ed when it is a person's answer not checked
 * yet (a `wrapToolCall` hook's result): its texts through `transform`, before
 * the result is journaled or stored.
 */
export const checkResult = <E, R>(
  part: Prompt.ToolResultPart,
  middleware: string,
  hook: string,
  transform: (messages: ReadonlyArray<Prompt.Message>) => Effect.Effect<ReadonlyArray<Prompt.Message>, E, R>
): Effect.Effect<Prompt.ToolResultPart, E | InvalidHookResult, R> =>
  isUnchecked(part)
    ? Effect.map(
      throughInput(textsOf(part.result, []), middleware, hook, transform),
      (texts) => checkedPart(part, texts)
    )
    : Effect.succeed(part)

/** `part` with `texts` in place of its own, in {@link textsOf}'s order, marked checked. */
const checkedPart = (part: Prompt.ToolResultPart, texts: Array<string>): Prompt.ToolResultPart =>
  Prompt.makePart("tool-result", {
    id: part.id,
    name: part.name,
    result: withTexts(part.result, texts),
    isFailure: part.isFailure,
    providerExecuted: part.providerExecuted,
    options: checked
  })

/**
 * Texts a person typed passed through `transform` (the `transformInput`
 * hooks) as one user message each; when the hooks give back other than one
 * user message per text, `InvalidHookResult` names the middleware whose
 * answer (or decision) held them.
 */
export const throughInput = <E, R>(
  given: ReadonlyArray<string>,
  middleware: string,
  hook: string,
  transform: (messages: ReadonlyArray<Prompt.Message>) => Effect.Effect<ReadonlyArray<Prompt.Message>, E, R>
): Effect.Effect<Array<string>, E | InvalidHookResult, R> => {
  const input = given.map((text) => Prompt.makeMessage("user", { content: [Prompt.makePart("text", { text })] }))
  return Effect.flatMap(transform(input), (output) => {
    const texts: Array<string> = []
    for (const message of output) {
      if (message.role !== "user") break
      texts.push(message.content.map((part) => part.type === "text" ? part.text : "").join(""))
    }
    return output.length !== input.length || texts.length !== input.length
      ? Effect.fail(
        new InvalidHookResult({
          middleware,
          hook,
          reason: `a person's answer is ${input.length} text message(s) through the transformInput hooks, ` +
            `which gave back ${output.length} message(s) of other shape`
        })
      )
      : Effect.succeed(texts)
  })
}
