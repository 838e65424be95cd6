import { AiError, Prompt } from "@effect/ai"
import { assert, describe, it } from "@effect/vitest"
import { Middleware, ModelProfile } from "@stepwise-agent/core"
import * as TokenCounter from "@stepwise-agent/core/TokenCounter"
import { ScriptedModel } from "@stepwise-agent/testing"
import * as Arbitraries from "@stepwise-agent/testing/Arbitraries"
import * as FakeOpenAi from "@stepwise-agent/testing/FakeOpenAi"
import { Effect, FastCheck, Option } from "effect"
import * as ContextEditing from "../src/ContextEditing.js"
import * as ContextOverflow from "../src/ContextOverflow.js"

/** The middleware, built as `Agent.make` builds it, to call its hooks directly. */
const built = <M extends Middleware.Any>(middleware: M) =>
  Effect.orDie(Middleware.build(middleware)) as Effect.Effect<M>

const httpError = (status: number, body: unknown, contentType = "application/json") =>
  ScriptedModel.httpError(
    status,
    { "content-type": contentType },
    typeof body === "string" ? body : JSON.stringify(body, null, 2)
  )

const openAiBody = FakeOpenAi.contextLengthExceededBody

const anthropicBody = (requested: number, limit: number) => ({
  type: "error",
  error: { type: "invalid_request_error", message: `prompt is too long: ${requested} tokens > ${limit} maximum` }
})

describe("classify", () => {
  it("reads OpenAI's context_length_exceeded, Anthropic's prompt is too long and a 413", () => {
    const openAi = Option.getOrThrow(ContextOverflow.classify(httpError(400, openAiBody(128_000, 130_000))))
    assert.deepStrictEqual(
      [openAi.status, openAi.limit, openAi.reportedTokens],
      [400, 128_000, 130_000]
    )
    assert.include(openAi.message, "maximum context length is 128000 tokens")
    const anthropic = Option.getOrThrow(ContextOverflow.classify(httpError(400, anthropicBody(208_310, 200_000))))
    assert.deepStrictEqual([anthropic.status, anthropic.limit, anthropic.reportedTokens], [400, 200_000, 208_310])
    // the Responses API's wording, with the code and no numbers
    const responses = Option.getOrThrow(ContextOverflow.classify(httpError(400, {
      error: {
        message: "Your input exceeds the context window of this model. Please adjust your input and try again.",
        type: "invalid_request_error",
        param: "input",
        code: "context_length_exceeded"
      }
    })))
    assert.deepStrictEqual([responses.limit, responses.reportedTokens], [undefined, undefined])
    const tooLarge = Option.getOrThrow(
      ContextOverflow.classify(httpError(413, "<html>Request Entity Too Large</html>", "text/html"))
    )
    assert.deepStrictEqual([tooLarge.status, tooLarge.limit], [413, undefined])
    assert.include(tooLarge.message, "Request Entity Too Large")
  })

  it("other failures are not overflows", () => {
    const others: ReadonlyArray<AiError.AiError> = [
      httpError(400, {
        error: { message: "Invalid value for 'temperature'", type: "invalid_request_error", code: null }
      }),
      httpError(429, openAiBody(128_000, 130_000)),
      httpError(500, { error: { message: "server error" } }),
      new AiError.UnknownError({ module: "M", method: "m", description: "prompt is too long" })
    ]
    for (const error of others) assert.isTrue(Option.isNone(ContextOverflow.classify(error)), error.message)
  })

  it("a secret in the provider's message is scrubbed", () => {
    const overflow = Option.getOrThrow(ContextOverflow.classify(httpError(400, {
      error: {
        message: "prompt is too long (sent with Authorization: Bearer sk-live-123)",
        code: "context_length_exceeded"
      }
    })))
    assert.notInclude(overflow.message, "sk-live-123")
    assert.include(overflow.message, "prompt is too long")
  })

  it.prop(
    "the sizes the message states are read back, thousands separators too",
    {
      limit: FastCheck.integer({ min: 1, max: 10_000_000 }),
      extra: FastCheck.integer({ min: 1, max: 1_000_000 }),
      anthropic: FastCheck.boolean(),
      separators: FastCheck.boolean()
    },
    ({ anthropic, extra, limit, separators }) => {
      const show = (n: number) => separators ? n.toLocaleString("en-US") : String(n)
      const requested = limit + extra
      const body = anthropic
        ? {
          error: {
            type: "invalid_request_error",
            message: `prompt is too long: ${show(requested)} tokens > ${show(limit)} maximum`
          }
        }
        : {
          error: {
            message: `This model's maximum context length is ${show(limit)} tokens. However, your messages resulted ` +
              `in ${show(requested)} tokens.`,
            code: "context_length_exceeded"
          }
        }
      const overflow = Option.getOrThrow(ContextOverflow.classify(httpError(400, body)))
      assert.deepStrictEqual([overflow.limit, overflow.reportedTokens], [limit, requested])
    }
  )

  it.prop("never throws, whatever the body", {
    body: FastCheck.string(),
    status: FastCheck.integer({ min: 100, max: 599 })
  }, ({ body, status }) => {
    const result = ContextOverflow.classify(httpError(status, body, "text/plain"))
    if (Option.isSome(result)) assert.isTrue(status === 413 || status === 400)
  })
})

// ---------------------------------------------------------------------------
// recover
// ---------------------------------------------------------------------------

const user = (text: string) => Prompt.makeMessage("user", { content: [Prompt.makePart("text", { text })] })

const request = (messages: ReadonlyArray<Prompt.Message>): Middleware.ModelRequest => ({
  messages,
  systemPrompt: "Be brief.",
  tools: [],
  toolChoice: "auto",
  model: undefined,
  context: {} as Middleware.ModelRequest["context"],
  state: {},
  threadId: "t",
  step: 0
})

/** A `next` that answers from a list of outcomes and records the requests it got. */
const scripted = (outcomes: ReadonlyArray<AiError.AiError | string>) => {
  const seen: Array<Middleware.ModelRequest> = []
  const next: Middleware.NextModelCall = (req) =>
    Effect.suspend(() => {
      const outcome = outcomes[seen.length]!
      seen.push(req)
      return typeof outcome === "string" ? Effect.succeed(Middleware.modelResponse(outcome)) : Effect.fail(outcome)
    })
  return { next, seen }
}

const dropOldest = ContextOverflow.recover({
  compact: (req) =>
    Effect.succeed(req.messages.length <= 1 ? Option.none() : Option.some({ ...req, messages: req.messages.slice(1) }))
})

const history = [user("a".repeat(400)), user("b".repeat(40)), user("c")]

describe("recover", () => {
  it.effect("compacts and retries once after an overflow", () =>
    Effect.gen(function*() {
      const { next, seen } = scripted([httpError(400, openAiBody(100, 130)), "fits now"])
      const response = yield* dropOldest(request(history), next)
      assert.strictEqual(response.message.content[0]!.type === "text" && response.message.content[0]!.text, "fits now")
      assert.deepStrictEqual(seen.map((r) => r.messages.length), [3, 2])
      assert.strictEqual(seen[1]!.messages[0], history[1])
    }))

  it.effect("fails with ContextOverflow carrying the sizes when the retry overflows too", () =>
    Effect.gen(function*() {
      const { next, seen } = scripted([httpError(400, openAiBody(100, 130)), httpError(400, openAiBody(100, 110))])
      const error = yield* Effect.flip(
        dropOldest(request(history), next).pipe(Effect.provide(ModelProfile.layerModel("gpt-4o")))
      )
      assert.strictEqual(error._tag, "ContextOverflow")
      const overflow = error as ContextOverflow.ContextOverflow
      assert.strictEqual(seen.length, 2)
      assert.strictEqual(overflow.compacted, true)
      assert.strictEqual(overflow.model, "gpt-4o")
      assert.strictEqual(overflow.limit, 100)
      assert.strictEqual(overflow.reportedTokens, 110)
      assert.strictEqual(overflow.messages, 2)
      // approximate counter: ceil((characters + role) / 4) + 3 per message:
      // system "Be brief." 4 + 3, "b"×40 11 + 3, "c" 2 + 3
      assert.strictEqual(overflow.measuredTokens, 7 + 14 + 5)
      assert.include(overflow.message, "even after compaction")
    }))

  it.effect("with nothing to compact it fails at once; the limit falls back to the model's profile", () =>
    Effect.gen(function*() {
      const { next, seen } = scripted([httpError(413, "too large", "text/plain")])
      const error = yield* Effect.flip(
        dropOldest(request([user("c")]), next).pipe(
          Effect.provide(ModelProfile.layerModel("claude-sonnet-4-5-20250929")),
          Effect.provide(TokenCounter.layerApproximate({ charsPerToken: 1 }))
        )
      )
      const overflow = error as ContextOverflow.ContextOverflow
      assert.strictEqual(seen.length, 1)
      assert.deepStrictEqual(
        [overflow._tag, overflow.compacted, overflow.status, overflow.limit, overflow.reportedTokens],
        ["ContextOverflow", false, 413, 200_000, undefined]
      )
      // the counter in context: 1 character per token, (characters + role) + 3 per message
      assert.strictEqual(overflow.measuredTokens, (9 + 6) + 3 + (1 + 4) + 3)
    }))

  it.effect("other failures pass through untouched and nothing is compacted", () =>
    Effect.gen(function*() {
      let compacted = 0
      const recover = ContextOverflow.recover({
        compact: (req) => Effect.sync(() => (compacted++, Option.some(req)))
      })
      const rateLimited = httpError(429, openAiBody(100, 130))
      const { next, seen } = scripted([rateLimited])
      const error = yield* Effect.flip(recover(request(history), next))
      assert.strictEqual(error, rateLimited)
      assert.deepStrictEqual([seen.length, compacted], [1, 0])
    }))
})

describe("middleware (policy: clearToolUses)", () => {
  const overflowing = httpError(400, openAiBody(100, 130))
  const toolResults = (messages: ReadonlyArray<Prompt.Message>) =>
    messages.flatMap((m) => m.role === "tool" ? m.content : [])

  it.effect.prop(
    "the retry clears every result but the newest `keep`, never orphans a pair, and leaves the request as it was",
    {
      messages: Arbitraries.conversation({ maxTurns: 5, maxResultSize: 200 }),
      keep: FastCheck.nat({ max: 4 })
    },
    ({ keep, messages }) =>
      Effect.gen(function*() {
        const overflow = yield* built(ContextOverflow.middleware({ policy: "clearToolUses", keep }))
        const before = JSON.stringify(messages)
        const { next, seen } = scripted([overflowing, "fits now"])
        const outcome = yield* Effect.either(overflow.wrapModelCall!(request(messages), next))
        assert.strictEqual(JSON.stringify(messages), before)
        const results = toolResults(messages)
        if (results.length <= keep) {
          // nothing to clear: no retry, a typed failure
          assert.strictEqual(seen.length, 1)
          assert.isTrue(outcome._tag === "Left" && outcome.left._tag === "ContextOverflow")
          return
        }
        assert.strictEqual(outcome._tag, "Right")
        assert.strictEqual(seen.length, 2)
        const retry = seen[1]!.messages
        assert.deepStrictEqual(Arbitraries.problems(retry), [])
        const sent = toolResults(retry)
        assert.deepStrictEqual(sent.map((r) => r.id), results.map((r) => r.id))
        const cleared = sent.map(ContextEditing.isCleared)
        assert.deepStrictEqual(cleared, results.map((_, i) => i < results.length - keep))
        assert.deepStrictEqual(sent.slice(results.length - keep), results.slice(results.length - keep))
      }).pipe(Effect.scoped),
    { fastCheck: { numRuns: 40 } }
  )

  it.effect("a thread that overflowed is cleared before its next call; other threads are not", () =>
    Effect.gen(function*() {
      const overflow = yield* built(ContextOverflow.middleware({ policy: "clearToolUses", keep: 0 }))
      const messages = [
        user("go"),
        Prompt.makeMessage("assistant", {
          content: [Prompt.makePart("tool-call", { id: "c1", name: "search", params: {}, providerExecuted: false })]
        }),
        Prompt.makeMessage("tool", {
          content: [
            Prompt.makePart("tool-result", {
              id: "c1",
              name: "search",
              isFailure: false,
              result: "long",
              providerExecuted: false
            })
          ]
        })
      ]
      const first = scripted([overflowing, "fits now"])
      yield* overflow.wrapModelCall!(request(messages), first.next)
      const second = scripted(["fits at once"])
      yield* overflow.wrapModelCall!(request(messages), second.next)
      assert.strictEqual(second.seen.length, 1)
      assert.isTrue(ContextEditing.isCleared(toolResults(second.seen[0]!.messages)[0]!))
      const other = scripted(["fits"])
      yield* overflow.wrapModelCall!({ ...request(messages), threadId: "u" }, other.next)
      assert.isFalse(ContextEditing.isCleared(toolResults(other.seen[0]!.messages)[0]!))
      // once deleted, the thread starts afresh
      yield* overflow.onThreadDeleted!("t", Option.none())
      const fresh = scripted(["fits"])
      yield* overflow.wrapModelCall!(request(messages), fresh.next)
      assert.isFalse(ContextEditing.isCleared(toolResults(fresh.seen[0]!.messages)[0]!))
    }).pipe(Effect.scoped))

  it.effect("bad options fail with InvalidOptions naming the option", () =>
    Effect.gen(function*() {
      const invalid = (options: unknown) =>
        Effect.flip(Middleware.build(ContextOverflow.middleware(options as ContextOverflow.MiddlewareOptions))).pipe(
          Effect.map((e) => [e.module, e.option] as const)
        )
      assert.deepStrictEqual(yield* invalid({}), ["ContextOverflow", "policy"])
      assert.deepStrictEqual(yield* invalid({ policy: "summarize" }), ["ContextOverflow", "policy"])
      assert.deepStrictEqual(yield* invalid({ policy: "clearToolUses", keep: -1 }), ["ContextOverflow", "keep"])
      assert.deepStrictEqual(yield* invalid({ policy: "clearToolUses", trigger: 5 }), ["ContextOverflow", "trigger"])
    }))
})
