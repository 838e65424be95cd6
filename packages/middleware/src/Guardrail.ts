/**
 * Guardrail: a check of the user's input before the model sees it, and of
 * the model's reply before it is stored, that can allow, block or rewrite.
 *
 * - `input` runs in `beforeModel` on the user messages the model has not
 *   answered yet (those after the last assistant or tool message), so it
 *   checks each run's input once, on its first model call.
 * - `output` runs in `afterModel` on the assistant reply.
 *
 * Each returns a {@link GuardrailVerdict}: {@link allow}; {@link block}, which
 * fails the run with a `"Blocked"` {@link GuardrailError} (or, with `onBlock: "end"`,
 * ends the run with an assistant message saying why); or {@link rewrite}, which
 * replaces the checked messages in the stored conversation, with a text (the
 * input becomes one user message with it; the reply keeps its tool calls and
 * gets it as its text) or with messages of your own.
 *
 * @since 0.1.0
 */
import * as Prompt from "@effect/ai/Prompt"
import type * as AgentError from "@stepwise-agent/core/AgentError"
import * as Middleware from "@stepwise-agent/core/Middleware"
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import * as Predicate from "effect/Predicate"
import * as Schema from "effect/Schema"
import * as Check from "./internal/options.js"

// -----------------------------------------------------------------------------
// models
// -----------------------------------------------------------------------------

/**
 * What a check decided.
 *
 * @since 0.1.0
 * @category models
 */
export type GuardrailVerdict = Data.TaggedEnum<{
  /** Let it through unchanged. */
  Allow: {}
  /** Refuse it. */
  Block: { readonly reason: string }
  /** Replace it with a text, or with messages. */
  Rewrite: { readonly replacement: string | ReadonlyArray<Prompt.Message> }
}>

const Verdict = Data.taggedEnum<GuardrailVerdict>()

/**
 * Lets the checked messages through.
 *
 * @since 0.1.0
 * @category constructors
 */
export const allow: GuardrailVerdict = Verdict.Allow()

/**
 * Blocks the checked messages for a reason.
 *
 * @example
 * ```ts
 * import * as Guardrail from "@stepwise-agent/middleware/Guardrail"
 *
 * const verdict = Guardrail.block("asks for medical advice")
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const block = (reason: string): GuardrailVerdict => Verdict.Block({ reason })

/**
 * Replaces the checked messages: with a text, or with messages.
 *
 * @example
 * ```ts
 * import * as Guardrail from "@stepwise-agent/middleware/Guardrail"
 *
 * const verdict = Guardrail.rewrite("Please summarize the attached report.")
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const rewrite = (replacement: string | ReadonlyArray<Prompt.Message>): GuardrailVerdict =>
  Verdict.Rewrite({ replacement })

/**
 * Matches on a verdict.
 *
 * @since 0.1.0
 * @category pattern matching
 */
export const $match = Verdict.$match

/**
 * Which check ran.
 *
 * @since 0.1.0
 * @category models
 */
export type Stage = "input" | "output"

/**
 * What a check gets besides the messages it checks.
 *
 * @since 0.1.0
 * @category models
 */
export interface CheckContext {
  /** The whole stored conversation, without the system prompt. */
  readonly conversation: ReadonlyArray<Prompt.Message>
  readonly threadId: string
  readonly step: number
}

/**
 * Options of {@link middleware}.
 *
 * @since 0.1.0
 * @category models
 */
export interface Options<EI, RI, EO, RO> {
  /** The middleware's name (default `"guardrail"`), shown in errors and decisions. */
  readonly name?: string | undefined
  /** Checks the user messages the model has not answered yet. */
  readonly input?:
    | ((messages: ReadonlyArray<Prompt.UserMessage>, context: CheckContext) => Effect.Effect<GuardrailVerdict, EI, RI>)
    | undefined
  /** Checks the assistant reply. */
  readonly output?:
    | ((message: Prompt.AssistantMessage, context: CheckContext) => Effect.Effect<GuardrailVerdict, EO, RO>)
    | undefined
  /**
   * `"error"` (default): a block fails the run with a `"Blocked"` `GuardrailError`;
   * `"end"`: it ends the run with an assistant message (`blockedMessage`, or
   * the reason), dropping a blocked reply and its tool calls.
   */
  readonly onBlock?: "error" | "end" | undefined
  /** The assistant message of a run ended by a block (default: the block's reason). */
  readonly blockedMessage?: string | undefined
}

// -----------------------------------------------------------------------------
// errors
// -----------------------------------------------------------------------------

/**
 * What a {@link GuardrailError} is about: `"Blocked"`, a check blocked the
 * input or the output (`detail` is the block's reason);
 * `"InvalidVerdict"`, a check returned something that is not a usable verdict
 * — not a verdict at all, or a rewrite with no messages (`detail` says
 * which).
 *
 * @since 0.1.0
 * @category errors
 */
export const GuardrailErrorReason = Schema.Literal("Blocked", "InvalidVerdict")

/**
 * @since 0.1.0
 * @category errors
 */
export type GuardrailErrorReason = typeof GuardrailErrorReason.Type

/**
 * A guardrail stopped the run: `reason` says why ({@link GuardrailErrorReason}),
 * `guardrail` and `stage` which check, and `detail` what it said.
 *
 * @example
 * ```ts
 * import { Agent } from "@stepwise-agent/core"
 * import * as Guardrail from "@stepwise-agent/middleware/Guardrail"
 * import { Effect } from "effect"
 *
 * const noSecrets = Guardrail.middleware({ input: () => Effect.succeed(Guardrail.block("mentions a password")) })
 *
 * // a blocked run answers with the block's reason; an invalid verdict still fails
 * const program = Effect.gen(function*() {
 *   const agent = yield* Agent.make({ middleware: [noSecrets] })
 *   return yield* agent.run("my password is hunter2", { threadId: "t1" }).pipe(
 *     Effect.catchTag("GuardrailError", (error) =>
 *       error.reason === "Blocked" ? Effect.succeed(`Refused: ${error.detail}`) : Effect.fail(error))
 *   )
 * })
 * ```
 *
 * @since 0.1.0
 * @category errors
 */
export class GuardrailError extends Schema.TaggedError<GuardrailError>(
  "@stepwise-agent/middleware/Guardrail/GuardrailError"
)("GuardrailError", {
  reason: GuardrailErrorReason,
  guardrail: Schema.String,
  stage: Schema.Literal("input", "output"),
  detail: Schema.String
}) {
  /**
   * @since 0.1.0
   */
  override get message(): string {
    return this.reason === "Blocked"
      ? `Guardrail "${this.guardrail}" blocked the ${this.stage}: ${this.detail}`
      : `Guardrail "${this.guardrail}" gave an invalid ${this.stage} verdict: ${this.detail}`
  }
}

// -----------------------------------------------------------------------------
// constructors
// -----------------------------------------------------------------------------

const isVerdict = (u: unknown): u is GuardrailVerdict =>
  Predicate.hasProperty(u, "_tag") && (
    u._tag === "Allow" ||
    (u._tag === "Block" && Predicate.hasProperty(u, "reason") && typeof u.reason === "string") ||
    (u._tag === "Rewrite" && Predicate.hasProperty(u, "replacement") &&
      (typeof u.replacement === "string" || Array.isArray(u.replacement)))
  )

const textMessage = <Role extends "user" | "assistant">(role: Role, text: string) =>
  Prompt.makeMessage(role, { content: [Prompt.makePart("text", { text })] } as any) as Extract<
    Prompt.Message,
    { role: Role }
  >

/** The reply with its text parts replaced by one text part, where the first one was. */
const withText = (message: Prompt.AssistantMessage, text: string): Prompt.AssistantMessage => {
  const content: Array<Prompt.AssistantMessagePart> = []
  let placed = false
  for (const part of message.content) {
    if (part.type !== "text") {
      content.push(part)
    } else if (!placed) {
      content.push(Prompt.makePart("text", { text }))
      placed = true
    }
  }
  if (!placed) content.unshift(Prompt.makePart("text", { text }))
  return Prompt.makeMessage("assistant", { content, options: message.options })
}

const OptionsSchema = Schema.Struct({
  name: Schema.optional(Check.NonEmpty),
  input: Schema.optional(Check.AnyFunction),
  output: Schema.optional(Check.AnyFunction),
  onBlock: Schema.optional(Schema.Literal("error", "end")),
  blockedMessage: Schema.optional(Schema.String)
})

/**
 * Builds the middleware. Bad options fail `Agent.make` with
 * `AgentError.InvalidOptions`: give `input`, `output` or both. During a
 * run a block fails with a `"Blocked"` {@link GuardrailError} (unless `onBlock: "end"`),
 * and a check's own errors and services flow into the agent's types. Every
 * block and rewrite is reported as a decision.
 *
 * @example
 * ```ts
 * import { Agent } from "@stepwise-agent/core"
 * import * as Guardrail from "@stepwise-agent/middleware/Guardrail"
 * import { Effect } from "effect"
 *
 * const noSecrets = Guardrail.middleware({
 *   name: "noSecrets",
 *   input: (messages) =>
 *     Effect.succeed(
 *       messages.some((m) => m.content.some((p) => p.type === "text" && p.text.includes("password")))
 *         ? Guardrail.block("the input mentions a password")
 *         : Guardrail.allow
 *     )
 * })
 *
 * const program = Effect.gen(function*() {
 *   const agent = yield* Agent.make({ middleware: [noSecrets] })
 *   return yield* agent.run("my password is hunter2", { threadId: "t1" }) // fails with a "Blocked" GuardrailError
 * })
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const middleware = <EI = never, RI = never, EO = never, RO = never>(
  options: Options<EI, RI, EO, RO>
): Middleware.Middleware<{}, GuardrailError | EI | EO, RI | RO> =>
  Middleware.unwrap(setup(options), { name: Check.nameOf(options, "guardrail") })

/** Decodes the options and builds the middleware: the setup `Agent.make` runs. */
const setup = <EI = never, RI = never, EO = never, RO = never>(
  options: Options<EI, RI, EO, RO>
): Effect.Effect<
  Middleware.Middleware<{}, GuardrailError | EI | EO, RI | RO>,
  AgentError.InvalidOptions
> =>
  Effect.gen(function*() {
    // (no options, from JavaScript, stand for `{}` here as in the check)
    options ??= {}
    yield* Check.validate("Guardrail", OptionsSchema, options)
    if (options.input === undefined && options.output === undefined) {
      return yield* Check.invalid("Guardrail", "input", "give an input check, an output check or both")
    }
    const onBlock = options.onBlock ?? "error"
    const name = options.name ?? "guardrail"

    const verdictOf = <E, R>(stage: Stage, check: Effect.Effect<GuardrailVerdict, E, R>) =>
      Effect.flatMap(check, (verdict): Effect.Effect<GuardrailVerdict, GuardrailError> => {
        if (!isVerdict(verdict)) {
          return Effect.fail(
            new GuardrailError({
              reason: "InvalidVerdict",
              guardrail: name,
              stage,
              detail: "expected Guardrail.allow, Guardrail.block(reason) or Guardrail.rewrite(replacement)"
            })
          )
        }
        if (verdict._tag === "Rewrite" && typeof verdict.replacement !== "string" && verdict.replacement.length === 0) {
          return Effect.fail(
            new GuardrailError({
              reason: "InvalidVerdict",
              guardrail: name,
              stage,
              detail: "a rewrite needs at least one message"
            })
          )
        }
        return Effect.succeed(verdict)
      })

    const blocked = (stage: Stage, reason: string, messages: ReadonlyArray<Prompt.Message>) =>
      Effect.gen(function*() {
        yield* Middleware.report(`blocked the ${stage}: ${reason}`, { stage, reason })
        if (onBlock === "error") {
          return yield* new GuardrailError({ reason: "Blocked", guardrail: name, stage, detail: reason })
        }
        return {
          messages: [...messages, textMessage("assistant", options.blockedMessage ?? reason)],
          jumpTo: "end" as const
        }
      })

    const input = options.input
    const beforeModel = input === undefined ?
      undefined :
      ({ messages, step, threadId }: Middleware.HookContext<{}>) =>
        Effect.gen(function*() {
          let first = messages.length
          while (first > 0 && messages[first - 1]!.role === "user") first--
          if (first === messages.length) return undefined
          const checked = messages.slice(first) as ReadonlyArray<Prompt.UserMessage>
          const verdict = yield* verdictOf("input", input(checked, { conversation: messages, threadId, step }))
          switch (verdict._tag) {
            case "Allow":
              return undefined
            case "Block":
              return yield* blocked("input", verdict.reason, messages.slice(0, first).concat(checked))
            case "Rewrite": {
              const replacement = typeof verdict.replacement === "string"
                ? [textMessage("user", verdict.replacement)]
                : verdict.replacement
              yield* Middleware.report("rewrote the input", { stage: "input", replaced: checked.length })
              return { messages: [...messages.slice(0, first), ...replacement] }
            }
          }
        })

    const output = options.output
    const afterModel = output === undefined ?
      undefined :
      ({ messages, step, threadId }: Middleware.HookContext<{}>) =>
        Effect.gen(function*() {
          let index = messages.length - 1
          while (index >= 0 && messages[index]!.role !== "assistant") index--
          if (index < 0) return undefined
          const reply = messages[index] as Prompt.AssistantMessage
          const verdict = yield* verdictOf("output", output(reply, { conversation: messages, threadId, step }))
          switch (verdict._tag) {
            case "Allow":
              return undefined
            case "Block":
              return yield* blocked("output", verdict.reason, messages.slice(0, index))
            case "Rewrite": {
              const replacement = typeof verdict.replacement === "string"
                ? [withText(reply, verdict.replacement)]
                : verdict.replacement
              yield* Middleware.report("rewrote the output", { stage: "output" })
              return { messages: [...messages.slice(0, index), ...replacement, ...messages.slice(index + 1)] }
            }
          }
        })

    return Middleware.make({
      name,
      canJumpTo: onBlock === "end" ? ["end"] : [],
      beforeModel,
      afterModel
    }) as Middleware.Middleware<{}, GuardrailError | EI | EO, RI | RO>
  }).pipe(Effect.withSpan("Guardrail.middleware", { captureStackTrace: false }))
