import type { AiError } from "@effect/ai"
import { LanguageModel } from "@effect/ai"
import { Tool, Toolkit } from "@effect/ai"
import type { AgentError, AgentEvent, AgentResult, AgentState } from "@stepwise-agent/core"
import { Agent, Middleware } from "@stepwise-agent/core"
import type { Option, ParseResult, Scope, Stream } from "effect"
import { Context, Effect, Layer, Schema } from "effect"
import { describe, expect, test } from "tstyche"

class OverQuota extends Schema.TaggedError<OverQuota>()("OverQuota", {}) {}
class Refused extends Schema.TaggedError<Refused>()("Refused", {}) {}
class Quota extends Context.Tag("Quota")<Quota, { readonly left: number }>() {}
class Audit extends Context.Tag("Audit")<Audit, { readonly write: (line: string) => Effect.Effect<void> }>() {}

const quota = Middleware.make({
  name: "quota",
  state: { schema: Schema.Struct({ spent: Schema.Number }), initial: { spent: 0 } },
  beforeModel: ({ state }) => Effect.flatMap(Quota, (q) => state.spent < q.left ? Effect.void : new OverQuota())
})
const audit = Middleware.make({
  name: "audit",
  state: { schema: Schema.Struct({ lines: Schema.Array(Schema.String) }), initial: { lines: [] } },
  wrapToolCall: (request, next) =>
    Effect.gen(function*() {
      yield* Effect.flatMap(Audit, (a) => a.write(request.call.name))
      if (request.call.name === "rm") return yield* new Refused()
      return yield* next(request)
    })
})

const Add = Tool.make("add", { parameters: { a: Schema.Number, b: Schema.Number }, success: Schema.Number })
const Tools = Toolkit.make(Add)

type Errors =
  | AgentError.AgentConfigError
  | AgentError.InvalidOptions
  | AgentError.ToolNameClash
  | AgentError.UnknownTools

describe("Agent.make", () => {
  test("without options: messages only, no middleware errors, needs a LanguageModel", () => {
    const agent = Agent.make({})
    expect(agent).type.toBe<Effect.Effect<Agent.AgentOf<readonly []>, Errors, LanguageModel.LanguageModel>>()
    expect<Effect.Effect.Success<typeof agent>>().type.toBe<
      // no middleware waits: nothing can resume it
      Agent.Service<AgentState.AgentState, never, never, never>
    >()
  })

  test("the errors and services of the middleware flow into the agent", () => {
    const agent = Agent.make({ middleware: [quota, audit] })
    expect(agent).type.toBeAssignableTo<Effect.Effect<unknown, Errors, LanguageModel.LanguageModel | Quota | Audit>>()
    expect<Effect.Effect.Error<typeof agent>>().type.toBe<Errors>()
    expect<Effect.Effect.Context<typeof agent>>().type.toBe<LanguageModel.LanguageModel | Quota | Audit>()
    expect<Effect.Effect.Success<typeof agent>>().type.toBe<
      Agent.AgentOf<readonly [typeof quota, typeof audit]>
    >()
  })

  test("a provide layer's services leave the requirements; its errors and needs join, and a Scope is needed", () => {
    class NoKey extends Schema.TaggedError<NoKey>()("NoKey", {}) {}
    const ModelLive = Layer.effect(LanguageModel.LanguageModel, Effect.fail(new NoKey())) as Layer.Layer<
      LanguageModel.LanguageModel | Quota,
      NoKey,
      Audit
    >
    const agent = Agent.make({ middleware: [quota, audit], provide: ModelLive })
    expect(agent).type.toBeAssignableTo<Effect.Effect<unknown, unknown, Audit | Scope.Scope>>()
    expect<Effect.Effect.Context<typeof agent>>().type.toBe<Audit | Scope.Scope>()
    expect<Effect.Effect.Error<typeof agent>>().type.toBe<Errors | NoKey>()
    const layer = Agent.layer({ middleware: [quota, audit], provide: ModelLive })
    expect(layer).type.toBeAssignableTo<Layer.Layer<Agent.Agent, unknown, Audit>>()
    expect<Layer.Layer.Context<typeof layer>>().type.toBe<Audit>()
  })

  test("a run fails with the middleware errors, the agent's and the model's", () => {
    type Service = Effect.Effect.Success<ReturnType<typeof Agent.make<readonly [typeof quota, typeof audit]>>>
    type Run = ReturnType<Service["run"]>
    expect<Effect.Effect.Error<Run>>().type.toBe<OverQuota | Refused | AgentError.AgentError | AiError.AiError>()
    expect<Effect.Effect.Context<Run>>().type.toBe<never>()
  })

  test("the state merges the messages with every middleware's slice", () => {
    type Service = Effect.Effect.Success<ReturnType<typeof Agent.make<readonly [typeof quota, typeof audit]>>>
    type State = Effect.Effect.Success<ReturnType<Service["run"]>>["state"]
    expect<State["messages"]>().type.toBe<AgentState.AgentState["messages"]>()
    expect<State["spent"]>().type.toBe<number>()
    expect<State["lines"]>().type.toBe<ReadonlyArray<string>>()
    expect<State>().type.toBeAssignableTo<{ readonly spent: number; readonly lines: ReadonlyArray<string> }>()
  })

  test("the toolkit's handlers are needed", () => {
    expect<Effect.Effect.Context<ReturnType<typeof Agent.make<readonly [], never, Tool.Handler<"add">>>>>().type.toBe<
      LanguageModel.LanguageModel | Tool.Handler<"add">
    >()
  })

  test("a handled toolkit needs no handlers, as the agent's toolkit and as a middleware's tools", () => {
    const handled = {} as Toolkit.WithHandler<typeof Tools.tools>
    const _agent = Agent.make({ toolkit: handled })
    expect<Effect.Effect.Context<typeof _agent>>().type.toBe<LanguageModel.LanguageModel>()
    const more = Middleware.make({ name: "more", tools: handled })
    expect(more).type.toBe<Middleware.Middleware<{}, never, never, never>>()
    const _both = Agent.make({ toolkit: handled, middleware: [more] })
    expect<Effect.Effect.Context<typeof _both>>().type.toBe<LanguageModel.LanguageModel>()
  })

  test("a middleware made inside the list keeps its tools' services (no any)", () => {
    const handled = {} as Toolkit.WithHandler<typeof Tools.tools>
    const _value = Agent.make({ middleware: [Middleware.make({ name: "more", tools: handled })] })
    expect<Effect.Effect.Context<typeof _value>>().type.toBe<LanguageModel.LanguageModel>()
    const _effect = Agent.make({ middleware: [Middleware.make({ name: "more", tools: Effect.succeed(handled) })] })
    expect<Effect.Effect.Context<typeof _effect>>().type.toBe<LanguageModel.LanguageModel>()
    const _toolkit = Agent.make({ middleware: [Middleware.make({ name: "more", tools: Tools })] })
    expect<Effect.Effect.Context<typeof _toolkit>>().type.toBe<LanguageModel.LanguageModel | Tool.Handler<"add">>()
  })

  test("responseFormat types the output", () => {
    const Answer = Schema.Struct({ total: Schema.Number })
    const agent = Agent.make({ responseFormat: Answer })
    expect(agent).type.not.toRaiseError()
    type Result = Effect.Effect.Success<ReturnType<Effect.Effect.Success<typeof agent>["run"]>>
    expect<Result>().type.toBe<AgentResult.AgentResult<AgentState.AgentState, { readonly total: number }, never>>()
  })

  test("Agent.layer provides the Agent with the same errors and services", () => {
    expect(Agent.layer({ middleware: [quota, audit], toolkit: Tools })).type.toBe<
      Layer.Layer<Agent.Agent, Errors, LanguageModel.LanguageModel | Tool.Handler<"add"> | Quota | Audit>
    >()
  })

  test("middleware must be middleware", () => {
    expect(Agent.make({ middleware: [Effect.succeed(quota)] })).type.toRaiseError(
      "is missing the following properties"
    )
  })
})

describe("Agent.Agent", () => {
  test("the tag serves every agent, typed loosely", () => {
    expect<Context.Tag.Service<Agent.Agent>>().type.toBe<Agent.Service<any, any>>()
  })

  test("the accessors need the Agent", () => {
    expect(Agent.run("hi", { threadId: "t1" })).type.toBe<
      Effect.Effect<AgentResult.AgentResult<any, unknown>, any, Agent.Agent>
    >()
    expect(Agent.resume("t1", null)).type.toBe<
      Effect.Effect<AgentResult.AgentResult<any, unknown>, any, Agent.Agent>
    >()
  })

  test("a service's methods are typed by its state, errors and output", () => {
    type S = Agent.Service<AgentState.AgentState & { readonly n: number }, OverQuota, string>
    expect<ReturnType<S["run"]>>().type.toBe<
      Effect.Effect<
        AgentResult.AgentResult<AgentState.AgentState & { readonly n: number }, string>,
        Agent.RunError<OverQuota>
      >
    >()
    expect<ReturnType<S["stream"]>>().type.toBe<
      Stream.Stream<
        AgentEvent.AgentEvent<AgentState.AgentState & { readonly n: number }, string>,
        Agent.RunError<OverQuota>
      >
    >()
    expect<ReturnType<S["thread"]>>().type.toBe<
      Effect.Effect<
        Option.Option<Agent.ThreadSnapshot<AgentState.AgentState & { readonly n: number }>>,
        AgentError.CheckpointError | AgentError.InvalidInput
      >
    >()
    expect<ReturnType<S["deleteThread"]>>().type.toBe<Effect.Effect<void, AgentError.CheckpointError>>()
    expect<Agent.RunError<OverQuota>>().type.toBe<OverQuota | AgentError.AgentError | AiError.AiError>()
  })

  test("a closed agent's send fails with AgentClosed, in its type", () => {
    type S = Agent.Service
    expect<Effect.Effect.Error<ReturnType<S["send"]>>>().type.toBe<
      AgentError.InvalidInput | AgentError.InvalidOptions | AgentError.CheckpointError | AgentError.AgentClosed
    >()
  })

  test("a run's errors include AgentClosed and InvalidToolCalls", () => {
    expect<AgentError.AgentClosed>().type.toBeAssignableTo<Agent.RunError<never>>()
    expect<AgentError.InvalidToolCalls>().type.toBeAssignableTo<Agent.RunError<never>>()
  })
})

describe("Agent.Tag", () => {
  const makeAgent = Agent.make({ middleware: [quota, audit], responseFormat: Schema.Struct({ answer: Schema.String }) })
  class Support extends Agent.Tag("app/Support")<Support, Effect.Effect.Success<typeof makeAgent>>() {}

  test("a tag of one's own keeps the agent's state, errors and output", () => {
    const _answered = Effect.flatMap(Support, (agent) => agent.run("hi", { threadId: "t" }))
    expect<Effect.Effect.Context<typeof _answered>>().type.toBe<Support>()
    expect<Effect.Effect.Error<typeof _answered>>().type.toBe<Agent.RunError<OverQuota | Refused>>()
    type Result = Effect.Effect.Success<typeof _answered>
    expect<Extract<Result, { readonly _tag: "Completed" }>["output"]>().type.toBe<
      Option.Option<{ readonly answer: string }>
    >()
  })

  test("a posted decision and a stored output come back typed by the agent", () => {
    const _posted = Effect.flatMap(Support, (agent) => agent.validatePosted("t", { approve: true }))
    expect<Effect.Effect.Error<typeof _posted>>().type.toBe<Agent.RunError<OverQuota | Refused>>()
    const _output = Effect.flatMap(Support, (agent) => agent.decodeOutput({ answer: "42" }))
    expect<Effect.Effect.Success<typeof _output>>().type.toBe<{ readonly answer: string }>()
    expect(Effect.flatMap(Support, (agent) => agent.encodeOutput({ answer: "42" }))).type.toBe<
      Effect.Effect<unknown, ParseResult.ParseError, Support>
    >()
  })

  test("its layer is built from the Agent.make effect", () => {
    const _live = Layer.effect(Support, makeAgent)
    expect<Layer.Layer.Success<typeof _live>>().type.toBe<Support>()
  })

  test("the shared Agent tag stays loosely typed", () => {
    expect<Context.Tag.Service<typeof Agent.Agent>>().type.toBe<Agent.Service<any, any>>()
  })
})
