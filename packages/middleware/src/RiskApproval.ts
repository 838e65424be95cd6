/**
 * RiskApproval: approval by risk. A model reads each call of a gated tool and
 * gives a verdict — a risk (`"low" | "medium" | "high"`) and a reason — and
 * only calls at or above a threshold wait for a person; the others run.
 *
 * It is a `when` predicate for `HumanInTheLoop` ({@link make} gives one), so
 * the rest is HumanInTheLoop's: the verdict is asked once per call, when
 * HumanInTheLoop's `afterModel` sees the reply (after the `afterModel` hooks
 * of the middleware listed after it have edited it); it is reported as a
 * decision with its reason; a resumed run takes the calls the stored request
 * asked about and does not ask again. A classifier that fails, answers
 * anything that is not a verdict, or gives no answer within `timeout`
 * (default 30 seconds) makes the call wait for a person. A call whose
 * arguments do not decode is not classified: it cannot run, and the model
 * gets the error to repair it.
 *
 * The verdict holds for the call as it was judged only: when the call that
 * reaches its tool differs (a middleware's `afterModel` or any `wrapToolCall`,
 * listed before or after, changed its arguments), HumanInTheLoop judges it
 * again, and a call that now needs a person does not run unasked.
 *
 * The classifier is the `LanguageModel` behind the {@link Classifier} tag,
 * provided by {@link layer} (any `@effect/ai` provider; in tests a
 * `ScriptedModel`). It is asked for JSON text, which is decoded with the
 * {@link Verdict} schema.
 *
 * @since 0.1.0
 */
import type * as LanguageModel from "@effect/ai/LanguageModel"
import * as Prompt from "@effect/ai/Prompt"
import * as AgentError from "@stepwise-agent/core/AgentError"
import * as Middleware from "@stepwise-agent/core/Middleware"
import * as Secrets from "@stepwise-agent/core/Secrets"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import type * as HumanInTheLoop from "./HumanInTheLoop.js"
import * as Check from "./internal/options.js"

/**
 * How risky a call is, from least to most.
 *
 * @since 0.1.0
 * @category models
 */
export const Risk = Schema.Literal("low", "medium", "high")

/**
 * @since 0.1.0
 * @category models
 */
export type Risk = typeof Risk.Type

/**
 * The classifier's answer about one call.
 *
 * @since 0.1.0
 * @category models
 */
export const Verdict = Schema.Struct({ risk: Risk, reason: Schema.String })

/**
 * @since 0.1.0
 * @category models
 */
export type Verdict = typeof Verdict.Type

/**
 * The model that classifies calls.
 *
 * @since 0.1.0
 * @category tags
 */
export class Classifier extends Context.Tag("@stepwise-agent/middleware/RiskApproval/Classifier")<
  Classifier,
  LanguageModel.Service
>() {}

/**
 * Provides `model` as the {@link Classifier}.
 *
 * @example
 * ```ts
 * import { RiskApproval } from "@stepwise-agent/middleware"
 * import { ScriptedModel } from "@stepwise-agent/testing"
 * import { Effect, Layer } from "effect"
 *
 * const ClassifierLive = Layer.unwrapEffect(
 *   Effect.map(ScriptedModel.make([ScriptedModel.text(`{"risk":"low","reason":"read only"}`)]), ({ model }) =>
 *     RiskApproval.layer(model))
 * )
 * ```
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (model: LanguageModel.Service): Layer.Layer<Classifier> => Layer.succeed(Classifier, model)

/**
 * The classifier's instructions (the system prompt of each verdict).
 *
 * @since 0.1.0
 * @category constructors
 */
export const defaultPrompt = "You judge the risk of one tool call an AI agent is about to make, for a person who " +
  "approves the risky ones. Answer with JSON only: {\"risk\": \"low\" | \"medium\" | \"high\", \"reason\": " +
  "\"<one sentence>\"}. low: reads, or changes nothing that matters and is easy to undo. medium: changes data or " +
  "sends something, but can be undone. high: destructive, irreversible, costly, or reaches people or systems " +
  "outside the conversation."

/**
 * Options of {@link make}.
 *
 * @since 0.1.0
 * @category models
 */
export interface Options {
  /** Calls judged at or above this risk wait for a person (default `"medium"`). */
  readonly threshold?: Risk | undefined
  /** The classifier's instructions (default {@link defaultPrompt}). */
  readonly prompt?: string | undefined
  /**
   * How long a verdict may take (default {@link defaultTimeout}, 30 seconds;
   * finite and above zero). A classifier that has not answered by then is
   * stopped, and the call waits for a person, as for a failed classifier.
   */
  readonly timeout?: Duration.DurationInput | undefined
}

/**
 * How long a verdict may take when {@link Options} give no `timeout`.
 *
 * @since 0.1.0
 * @category constructors
 */
export const defaultTimeout: Duration.Duration = Duration.seconds(30)

const OptionsSchema = Schema.Struct({
  threshold: Schema.optional(Risk),
  prompt: Schema.optional(Schema.String),
  timeout: Schema.optional(Check.DurationInput)
})

const rank: Record<Risk, number> = { low: 0, medium: 1, high: 2 }

const decodeVerdict = Schema.decodeUnknown(Schema.parseJson(Verdict))

/** What the classifier is shown of a call: the tool, its arguments, and the user's last words. */
const describe = (call: Prompt.ToolCallPart, context: HumanInTheLoop.DescriptionContext): string => {
  let request = ""
  for (let i = context.messages.length - 1; i >= 0 && request === ""; i--) {
    const message = context.messages[i]!
    if (message.role !== "user") continue
    request = typeof message.content === "string"
      ? message.content
      : message.content.flatMap((part) => part.type === "text" ? [part.text] : []).join("\n")
  }
  return `The user asked: ${request === "" ? "(nothing)" : request}\n\n` +
    `The agent calls the tool "${call.name}" with the arguments ${JSON.stringify(call.params)}.`
}

/**
 * Builds the `when` predicate: a call needs a decision when the classifier
 * judges it at or above `threshold`, or gives no verdict within `timeout`.
 * Each verdict is reported (`risk` and `reason`, credentials scrubbed). Needs
 * the {@link Classifier} when built. Bad options fail with
 * `AgentError.InvalidOptions` (a `timeout` that is not a finite duration
 * above zero, an unknown `threshold`).
 *
 * Unlike the middleware constructors, it gives an `Effect`, not a value: it
 * builds a policy that goes into another middleware's options
 * (`HumanInTheLoop`'s `when`), not a middleware `Agent.make` would build, so
 * nothing else would run it. Build it in the setup of the middleware that
 * uses it (`Middleware.unwrap`), and `Agent.make` runs it, failing with its
 * errors.
 *
 * @example
 * ```ts
 * import { Tool, Toolkit } from "@effect/ai"
 * import { Middleware } from "@stepwise-agent/core"
 * import { HumanInTheLoop, RiskApproval } from "@stepwise-agent/middleware"
 * import { Effect, Schema } from "effect"
 *
 * const Deploy = Tool.make("deploy", { parameters: { env: Schema.String }, success: Schema.String })
 * const Tools = Toolkit.make(Deploy)
 *
 * // a middleware value: Agent.make reads the Classifier and decodes the options
 * const approvals = Middleware.unwrap(Effect.gen(function*() {
 *   const risky = yield* RiskApproval.make({ threshold: "high", timeout: "10 seconds" })
 *   return HumanInTheLoop.middleware({
 *     toolkit: Tools,
 *     interruptOn: { deploy: { allowedDecisions: ["approve", "reject"], when: risky } }
 *   })
 * }))
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (
  options?: Options | undefined
): Effect.Effect<HumanInTheLoop.When, AgentError.InvalidOptions, Classifier> =>
  Effect.gen(function*() {
    yield* Check.validate("RiskApproval", OptionsSchema, options ?? {})
    const timeout = Duration.decode(options?.timeout ?? defaultTimeout)
    if (!Duration.isFinite(timeout) || Duration.toMillis(timeout) <= 0) {
      return yield* Check.invalid("RiskApproval", "timeout", "must be a finite duration above zero")
    }
    const classifier = yield* Classifier
    const threshold = rank[options?.threshold ?? "medium"]
    const system = Prompt.makeMessage("system", { content: options?.prompt ?? defaultPrompt })
    const when: HumanInTheLoop.When = (call, context) =>
      classifier.generateText({
        prompt: Prompt.fromMessages([
          system,
          Prompt.makeMessage("user", { content: [Prompt.makePart("text", { text: describe(call, context) })] })
        ])
      }).pipe(
        // a classifier that does not stop when told to (an uninterruptible call) is left to stop on its own
        Effect.disconnect,
        Effect.timeoutFail({
          duration: timeout,
          onTimeout: () => `the classifier gave no verdict within ${Duration.format(timeout)}`
        }),
        Effect.flatMap((response) => decodeVerdict(response.text)),
        Effect.mapError((error) =>
          ParseResult.isParseError(error)
            ? `the classifier's answer is no verdict: ${AgentError.describeParseError(error)}`
            : error
        ),
        Effect.tap((verdict) =>
          Middleware.report(`risk of ${call.name} (${call.id}): ${verdict.risk}`, {
            callId: call.id,
            risk: verdict.risk,
            reason: Secrets.scrubText(verdict.reason)
          })
        ),
        Effect.map((verdict) => rank[verdict.risk] >= threshold)
      )
    return when
  })
