import type { AiError, Prompt } from "@effect/ai"
import type { AgentError, AgentResult, AgentState, Wait } from "@stepwise-agent/core"
import { Agent, Middleware } from "@stepwise-agent/core"
import { Context, Effect, type Layer, type Option, Schema, Stream } from "effect"
import { describe, expect, test } from "tstyche"

class OverQuota extends Schema.TaggedError<OverQuota>()("OverQuota", {}) {}
class Refused extends Schema.TaggedError<Refused>()("Refused", {}) {}
class BadResume extends Schema.TaggedError<BadResume>()("BadResume", {}) {}
class Quota extends Context.Tag("Quota")<Quota, { readonly left: number }>() {}
class Audit extends Context.Tag("Audit")<Audit, { readonly write: (line: string) => Effect.Effect<void> }>() {}
class Store extends Context.Tag("Store")<Store, { readonly drop: (threadId: string) => Effect.Effect<void> }>() {}

const counter = {
  schema: Schema.Struct({ calls: Schema.Number }),
  initial: { calls: 0 }
}

class Missing extends Schema.TaggedError<Missing>()("Missing", {}) {}

describe("Middleware.unwrap", () => {
  test("is a Middleware value: the setup's errors are its B, its services join R", () => {
    const built = Middleware.unwrap(Effect.gen(function*() {
      yield* Quota
      if (Math.random() > 2) return yield* new Missing()
      return Middleware.make({ name: "inner", beforeModel: () => new OverQuota() })
    }))
    expect(built).type.toBe<Middleware.Middleware<{}, OverQuota, Quota, Missing>>()
    expect<Middleware.BuildError<typeof built>>().type.toBe<Missing>()
    expect<Middleware.Requirements<typeof built>>().type.toBe<Quota>()
    expect(Middleware.build(built)).type.toBe<
      Effect.Effect<Middleware.Middleware<{}, OverQuota, Quota, Missing>, Missing, Quota>
    >()
  })

  test("a setup error joins the error of Agent.make and Agent.layer, not of a run", () => {
    const built = Middleware.unwrap(Effect.fail(new Missing()).pipe(Effect.as(Middleware.make({ name: "m" }))))
    const agent = Agent.make({ middleware: [built] })
    expect(agent).type.toBeAssignableTo<
      Effect.Effect<
        unknown,
        | AgentError.AgentConfigError
        | AgentError.InvalidOptions
        | AgentError.ToolNameClash
        | AgentError.UnknownTools
        | Missing,
        unknown
      >
    >()
    expect<Effect.Effect.Error<typeof agent>>().type.toBe<
      | AgentError.AgentConfigError
      | AgentError.InvalidOptions
      | AgentError.ToolNameClash
      | AgentError.UnknownTools
      | Missing
    >()
    expect<Layer.Layer.Error<ReturnType<typeof Agent.layer<readonly [typeof built]>>>>().type.toBe<
      | AgentError.AgentConfigError
      | AgentError.InvalidOptions
      | AgentError.ToolNameClash
      | AgentError.UnknownTools
      | Missing
    >()
    type RunErrors = Effect.Effect.Error<ReturnType<Effect.Effect.Success<typeof agent>["run"]>>
    expect<Extract<RunErrors, Missing>>().type.toBe<never>()
  })

  test("a middleware built with bad options by default: Middleware<S, E, R> fails building with InvalidOptions", () => {
    expect<Middleware.BuildError<Middleware.Middleware>>().type.toBe<AgentError.InvalidOptions>()
    // a middleware that cannot fail building is one too
    expect(Middleware.make({ name: "m" })).type.toBeAssignableTo<Middleware.Middleware>()
  })
})

describe("Middleware.make", () => {
  test("without state or hooks is a Middleware<{}, never, never, never>: nothing can fail building it", () => {
    expect(Middleware.make({ name: "empty" })).type.toBe<Middleware.Middleware<{}, never, never, never>>()
  })

  test("infers the state slice from its schema", () => {
    const m = Middleware.make({ name: "counter", state: counter })
    expect(m).type.toBe<Middleware.Middleware<{ readonly calls: number }, never, never, never>>()
    expect<Middleware.State<typeof m>>().type.toBe<{ readonly calls: number }>()
  })

  test("the state a node hook sees is the slice", () => {
    Middleware.make({
      name: "counter",
      state: counter,
      beforeModel: ({ state }) => {
        expect(state).type.toBe<{ readonly calls: number }>()
        return Effect.succeed({ state: { calls: state.calls + 1 } })
      }
    })
  })

  test("collects the errors and services of every hook", () => {
    const m = Middleware.make({
      name: "quota",
      state: counter,
      beforeModel: ({ state }) =>
        Effect.flatMap(
          Quota,
          (quota) => quota.left > 0 ? Effect.succeed({ state: { calls: state.calls + 1 } }) : new OverQuota()
        ),
      afterAgent: () => Effect.flatMap(Audit, (audit) => audit.write("done")),
      wrapToolCall: (request, next) => request.call.name === "rm" ? new Refused() : next(request),
      wait: {
        request: Schema.String,
        decision: Schema.Boolean,
        check: ({ decision }) => decision ? Effect.void : new BadResume()
      },
      onThreadDeleted: (threadId) => Effect.flatMap(Store, (store) => store.drop(threadId))
    })
    expect(m).type.toBe<
      Middleware.Middleware<
        { readonly calls: number },
        OverQuota | Refused | BadResume,
        Quota | Audit | Store,
        never,
        Wait.Declared<"quota", string, boolean>
      >
    >()
    expect<Middleware.Error<typeof m>>().type.toBe<OverQuota | Refused | BadResume>()
    expect<Middleware.Requirements<typeof m>>().type.toBe<Quota | Audit | Store>()
  })

  test("the errors of next and the run's Scope do not count as the middleware's", () => {
    const m = Middleware.make({
      name: "scoped",
      beforeAgent: () => Effect.addFinalizer(() => Effect.void),
      wrapModelCall: (request, next) => next(request),
      wrapToolCall: (request, next) => next(request)
    })
    expect(m).type.toBe<Middleware.Middleware<{}, never, never, never>>()
  })

  test("a wrapToolCall returns the tool result, with a state update or without; next gives the result alone", () => {
    const counting = Middleware.make({
      name: "counting",
      state: counter,
      wrapToolCall: (request, next) =>
        Effect.map(next(request), (result) => ({ ...result, state: { calls: Number(request.state.calls) + 1 } }))
    })
    expect(counting).type.toBe<Middleware.Middleware<{ readonly calls: number }, never, never, never>>()
    expect<ReturnType<Middleware.NextToolCall>>().type.toBe<
      Effect.Effect<Prompt.ToolResultPart, AgentError.ToolDefect | AgentError.ToolTimeout>
    >()
    // a tool result alone is a response: hooks that return one, and code that calls a hook and reads the result
    expect<Prompt.ToolResultPart>().type.toBeAssignableTo<Middleware.ToolCallResponse>()
    expect<Middleware.ToolCallResponse>().type.toBeAssignableTo<Prompt.ToolResultPart>()
    // a state goes with a tool result
    expect(Middleware.make({
      name: "broken",
      wrapToolCall: (request, next) => Effect.map(next(request), (result) => ({ result, state: {} }))
    })).type.toRaiseError()
  })

  test("collects the errors and services of wrapModelStream", () => {
    const m = Middleware.make({
      name: "redact",
      wrapModelStream: (_request, parts) =>
        parts.pipe(
          Stream.tap(() => Effect.flatMap(Audit, (audit) => audit.write("part"))),
          Stream.concat(Stream.fail(new Refused()))
        )
    })
    expect(m).type.toBe<Middleware.Middleware<{}, Refused, Audit, never>>()
  })

  test("its tools' services are its own; their errors fail Agent.make, not a run", () => {
    const tools = Effect.flatMap(Quota, () => new OverQuota()) as Effect.Effect<never, OverQuota, Quota>
    expect(Middleware.make({ name: "tools", tools })).type.toBe<Middleware.Middleware<{}, never, Quota, OverQuota>>()
  })

  test("withName keeps the middleware's type", () => {
    const m = Middleware.make({ name: "counter", state: counter, beforeModel: () => new OverQuota() })
    expect(m.pipe(Middleware.withName("other"))).type.toBe<typeof m>()
    expect(Middleware.withName(m, "other")).type.toBe<typeof m>()
  })
})

describe("canJumpTo", () => {
  test("a jump to a declared node compiles", () => {
    expect(Middleware.make({
      name: "stop",
      canJumpTo: ["end"],
      beforeModel: () => Effect.succeed({ jumpTo: "end" as const })
    })).type.toBe<Middleware.Middleware<{}, never, never, never>>()
  })

  test("a jump without canJumpTo is an error", () => {
    expect(Middleware.make({
      name: "stop",
      beforeModel: () => Effect.succeed({ jumpTo: "end" as const })
    })).type.toRaiseError(`Type '"end"' is not assignable to type 'undefined'`)
  })

  test("a jump to a node canJumpTo does not list is an error", () => {
    expect(Middleware.make({
      name: "stop",
      canJumpTo: ["end"],
      beforeModel: () => Effect.succeed({ jumpTo: "tools" as const })
    })).type.toRaiseError(`Type '"tools"' is not assignable to type '"end"'`)
  })

  test("canJumpTo accepts only the nodes", () => {
    expect(Middleware.make({ name: "stop", canJumpTo: ["start"] })).type.toRaiseError(
      `Type '"start"' is not assignable to type 'Jump'`
    )
  })
})

describe("utility types", () => {
  test("Any accepts every middleware", () => {
    expect<Middleware.Middleware<{ readonly calls: number }, OverQuota, Quota>>().type.toBeAssignableTo<
      Middleware.Any
    >()
  })

  test("NodeHook and HookResult are typed by the slice", () => {
    expect<Middleware.HookResult<{ readonly calls: number }>["state"]>().type.toBe<
      Partial<{ readonly calls: number }> | undefined
    >()
    expect<ReturnType<Middleware.NextModelCall>>().type.toBe<
      Effect.Effect<Middleware.ModelResponse, AiError.AiError | AgentError.ModelReplyError>
    >()
    expect<ReturnType<Middleware.NextToolCall>>().type.toBe<
      Effect.Effect<Prompt.ToolResultPart, AgentError.ToolDefect | AgentError.ToolTimeout>
    >()
  })
})

describe("typed waits", () => {
  const confirm = Middleware.make({
    name: "confirm",
    wait: { request: Schema.Struct({ question: Schema.String }), decision: Schema.Boolean },
    beforeModel: ({ resume }) =>
      Effect.succeed(resume._tag === "Some" ? undefined : { interrupt: { question: "go on?" } })
  })
  const audit = Middleware.make({ name: "audit" })

  test("a hook is resumed with its wait's decision", () => {
    Middleware.make({
      name: "typed",
      wait: { request: Schema.String, decision: Schema.Boolean },
      afterModel: ({ resume }) => {
        expect(resume).type.toBe<Option.Option<boolean>>()
        return Effect.void
      }
    })
  })

  test("a middleware's wait is in its type; one without a wait declares none", () => {
    expect<Middleware.Waits<typeof confirm>>().type.toBe<
      Wait.Declared<"confirm", { readonly question: string }, boolean>
    >()
    expect<Middleware.Waits<typeof audit>>().type.toBe<never>()
  })

  test("a hook interrupts only with its wait's request; a middleware without a wait cannot interrupt", () => {
    expect(Middleware.make).type.not.toBeCallableWith({
      name: "wrong",
      wait: { request: Schema.Struct({ question: Schema.String }), decision: Schema.Boolean },
      beforeModel: () => Effect.succeed({ interrupt: { question: 42 } })
    })
    expect(Middleware.make).type.not.toBeCallableWith({
      name: "undeclared",
      beforeModel: () => Effect.succeed({ interrupt: "may I?" })
    })
  })

  test("the agent's Interrupted carries the union of its waits, and resume takes the union of their decisions", () => {
    const other = Middleware.make({
      name: "pick",
      wait: { request: Schema.Array(Schema.String), decision: Schema.Number },
      afterModel: () => Effect.succeed(undefined)
    })
    const program = Effect.gen(function*() {
      const agent = yield* Agent.make({ middleware: [confirm, audit, other] })
      const result = yield* agent.run("hi", { threadId: "t" })
      if (result._tag === "Interrupted") {
        expect(result.interrupt).type.toBe<
          | { readonly middleware: "confirm"; readonly value: { readonly question: string }; readonly key: string }
          | { readonly middleware: "pick"; readonly value: ReadonlyArray<string>; readonly key: string }
        >()
        if (result.interrupt.middleware === "pick") expect(result.interrupt.value).type.toBe<ReadonlyArray<string>>()
      }
      expect(agent.resume).type.toBeCallableWith("t", true)
      expect(agent.resume).type.toBeCallableWith("t", 3)
      expect(agent.resume).type.not.toBeCallableWith("t", "yes")
      return result
    })
    expect(program).type.not.toBe<never>()
    expect<Effect.Effect.Success<typeof program>>().type.toBe<
      AgentResult.AgentResult<
        AgentState.AgentState,
        never,
        | Wait.Declared<"confirm", { readonly question: string }, boolean>
        | Wait.Declared<"pick", ReadonlyArray<string>, number>
      >
    >()
  })

  test("an agent without waits cannot be resumed; a typed agent is still an Agent.Service", () => {
    const program = Effect.gen(function*() {
      const plain = yield* Agent.make({ middleware: [audit] })
      expect(plain.resume).type.not.toBeCallableWith("t", "yes")
      const typed = yield* Agent.make({ middleware: [confirm] })
      expect(typed).type.toBeAssignableTo<Agent.Service<any, any, any>>()
    })
    expect(program).type.not.toBe<never>()
  })

  test("withName relabels the wait", () => {
    expect<Middleware.Waits<Middleware.WithName<typeof confirm, "ask">>>().type.toBe<
      Wait.Declared<"ask", { readonly question: string }, boolean>
    >()
  })
})
