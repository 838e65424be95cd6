import type { LanguageModel } from "@effect/ai"
import { Tool, Toolkit } from "@effect/ai"
import type { AgentError, Middleware, TokenCounter } from "@stepwise-agent/core"
import type { ContextView } from "@stepwise-agent/middleware"
import {
  Budget,
  ContextEditing,
  ContextOverflow,
  DynamicSystemPrompt,
  Guardrail,
  HumanInTheLoop,
  LlmToolSelector,
  Logging,
  ModelCallLimit,
  ModelFallback,
  ModelRetry,
  Offload,
  Pii,
  RateLimit,
  Summarization,
  TodoList,
  ToolCallLimit,
  ToolEmulator,
  ToolErrors,
  ToolRetry,
  Tracing
} from "@stepwise-agent/middleware"
import type { Layer } from "effect"
import { Context, Effect, Schema } from "effect"
import { describe, expect, test } from "tstyche"

class Blocked extends Schema.TaggedError<Blocked>()("Blocked", {}) {}
class Policy extends Context.Tag("Policy")<Policy, { readonly allows: (text: string) => boolean }>() {}

const Rm = Tool.make("rm", { parameters: { path: Schema.String } })
const Tools = Toolkit.make(Rm)

describe("constructors that return a middleware", () => {
  test("every built-in is a Middleware value (no Effect to yield*)", () => {
    expect(ModelCallLimit.middleware({ threadLimit: 3 })).type.toBeAssignableTo<Middleware.Any>()
    expect<Middleware.BuildError<ReturnType<typeof ModelRetry.middleware>>>().type.toBe<AgentError.InvalidOptions>()
    expect<ReturnType<typeof ToolRetry.middleware>>().type.not.toBeAssignableTo<
      Effect.Effect<unknown, unknown, unknown>
    >()
  })

  test("Logging, Tracing: no state, errors or services", () => {
    expect(Logging.middleware()).type.toBe<Middleware.Middleware<{}, never, never>>()
    expect(Tracing.middleware()).type.toBe<Middleware.Middleware<{}, never, never>>()
  })

  test("TodoList: the todos slice; the TodoList service is optional (its own in-memory one by default)", () => {
    expect(TodoList.middleware()).type.toBe<Middleware.Middleware<TodoList.State, never, never>>()
    expect<Middleware.State<ReturnType<typeof TodoList.middleware>>>().type.toBe<TodoList.State>()
  })

  test("DynamicSystemPrompt: the prompt's errors and services", () => {
    expect(DynamicSystemPrompt.middleware(() => "Be brief.")).type.toBe<
      Middleware.Middleware<{}, AgentError.InvalidHookResult, never>
    >()
    expect(DynamicSystemPrompt.middleware(() => Effect.flatMap(Policy, () => new Blocked()))).type.toBe<
      Middleware.Middleware<{}, Blocked | AgentError.InvalidHookResult, Policy>
    >()
  })

  test("ContextEditing: the edits' errors; a TokenCounter with the model method", () => {
    expect(ContextEditing.middleware()).type.toBe<Middleware.Middleware<{}, never, never>>()
    expect(ContextEditing.middleware({ tokenCountMethod: "model" })).type.toBe<
      Middleware.Middleware<{}, never, TokenCounter.TokenCounter>
    >()
  })
})

describe("constructors whose options need decoding: a middleware value, failing Agent.make with bad options", () => {
  test("ModelCallLimit: its counters and its error", () => {
    expect(ModelCallLimit.middleware({ threadLimit: 3 })).type.toBe<
      Middleware.Middleware<ModelCallLimit.State, ModelCallLimit.ModelCallLimitExceeded>
    >()
  })

  test("ToolCallLimit: counters named after the tool", () => {
    expect(ToolCallLimit.middleware({ threadLimit: 3 })).type.toBe<
      Middleware.Middleware<
        { readonly threadToolCallCount: number; readonly runToolCallCount: number },
        ToolCallLimit.ToolCallLimitExceeded
      >
    >()
    expect(ToolCallLimit.middleware({ threadLimit: 3, toolName: "search" })).type.toBe<
      Middleware.Middleware<
        { readonly "threadToolCallCount:search": number; readonly "runToolCallCount:search": number },
        ToolCallLimit.ToolCallLimitExceeded
      >
    >()
  })

  test("Budget: its spending slice and its two errors", () => {
    expect(Budget.middleware({ tokens: { runLimit: 1000 }, softLanding: true })).type.toBe<
      Middleware.Middleware<Budget.State, Budget.BudgetExceeded | Budget.UnpricedModel>
    >()
  })

  test("ContextOverflow: a recovery that fails with ContextOverflow", () => {
    expect(ContextOverflow.middleware({ policy: "clearToolUses" })).type.toBe<
      Middleware.Middleware<{}, ContextOverflow.ContextOverflow>
    >()
  })

  test("ModelRetry, ToolRetry, ToolErrors: nothing added", () => {
    expect(ModelRetry.middleware()).type.toBe<Middleware.Middleware>()
    expect(ToolRetry.middleware()).type.toBe<Middleware.Middleware>()
    expect(ToolErrors.middleware({ onError: () => undefined })).type.toBe<Middleware.Middleware>()
    expect(ToolErrors.middleware({ onError: () => Effect.succeed("unavailable") })).type.toBe<
      Middleware.Middleware
    >()
  })

  test("ToolErrors: onError must answer with text, undefined or an Effect of them", () => {
    expect(ToolErrors.middleware).type.not.toBeCallableWith({ onError: () => 42 })
    expect(ToolErrors.middleware).type.not.toBeCallableWith({ onError: () => Effect.fail("x") })
  })

  test("Pii: its detection errors", () => {
    expect(Pii.middleware({ types: ["email"], strategy: "redact" })).type.toBe<
      Middleware.Middleware<{}, Pii.PiiDetected | Pii.PiiDetectorFailed>
    >()
  })

  test("RateLimit: the RateLimiters service", () => {
    expect(RateLimit.middleware({ model: { limit: 10, interval: "1 minute" } })).type.toBe<
      Middleware.Middleware<{}, never, RateLimit.RateLimiters>
    >()
  })

  test("Summarization: the Summarizer service", () => {
    expect(Summarization.middleware({ trigger: { tokens: 1000 }, keep: { messages: 4 } })).type.toBe<
      Middleware.Middleware<
        {},
        Summarization.SummarizationFailed | ContextOverflow.ContextOverflow,
        Summarization.Summarizer
      >
    >()
  })

  test("Summarization view mode: the summaryView slice; offload: the summaryOffloads slice and the OffloadStore", () => {
    expect(Summarization.middleware({ trigger: { tokens: 1000 }, mode: "view", offload: true })).type.toBe<
      Middleware.Middleware<
        ContextView.SummarySlice & Summarization.OffloadSlice,
        Summarization.SummarizationFailed | ContextOverflow.ContextOverflow,
        Summarization.Summarizer | Offload.OffloadStore
      >
    >()
    expect(Summarization.middleware({ trigger: { tokens: 1000 }, offload: true })).type.toBe<
      Middleware.Middleware<
        Summarization.OffloadSlice,
        Summarization.SummarizationFailed | ContextOverflow.ContextOverflow,
        Summarization.Summarizer | Offload.OffloadStore
      >
    >()
  })

  test("Offload: the offloads slice; maxResultTokens: the TokenCounter", () => {
    expect(Offload.middleware()).type.toBe<Middleware.Middleware<Offload.State>>()
    expect(Offload.middleware({ maxResultTokens: 100 })).type.toBe<
      Middleware.Middleware<Offload.State, never, TokenCounter.TokenCounter>
    >()
  })

  test("ContextEditing view mode: the clearedView slice", () => {
    expect(ContextEditing.middleware({ mode: "view" })).type.toBe<
      Middleware.Middleware<ContextView.ClearedSlice, never, never>
    >()
  })

  test("Guardrail: the checks' errors and services", () => {
    expect(
      Guardrail.middleware({ input: () => Effect.flatMap(Policy, () => Effect.succeed(Guardrail.block("no"))) })
    ).type.toBe<
      Middleware.Middleware<{}, Guardrail.GuardrailError, Policy>
    >()
  })

  test("HumanInTheLoop: decision errors, a reply with duplicate call ids; a bad policy", () => {
    expect(HumanInTheLoop.middleware({ toolkit: Tools, interruptOn: { rm: true } })).type.toBe<
      Middleware.Middleware<
        {},
        HumanInTheLoop.DecisionError | HumanInTheLoop.DuplicateCallId,
        never,
        AgentError.InvalidOptions,
        HumanInTheLoop.Waits
      >
    >()
  })

  test("ModelFallback: the layers' errors and services", () => {
    const backup = null as unknown as Layer.Layer<LanguageModel.LanguageModel, Blocked, Policy>
    expect(ModelFallback.middleware(backup)).type.toBe<
      Middleware.Middleware<{}, ModelFallback.ModelFallbackExhausted | Blocked, Policy>
    >()
  })

  test("LlmToolSelector, ToolEmulator: the agent's LanguageModel unless given a model", () => {
    expect(LlmToolSelector.middleware()).type.toBe<Middleware.Middleware<{}, never, LanguageModel.LanguageModel>>()
    const model = null as unknown as LanguageModel.Service
    expect(ToolEmulator.middleware({ model })).type.toBe<
      Middleware.Middleware
    >()
  })
})
