import type { Prompt } from "@effect/ai"
import type { AgentState } from "@stepwise-agent/core"
import { Agent, Middleware } from "@stepwise-agent/core"
import { Effect, Schema } from "effect"
import { describe, expect, test } from "tstyche"

const sliceOf = <const K extends string, A, I>(key: K, schema: Schema.Schema<A, I>, initial: A) => ({
  schema: Schema.Struct({ [key]: schema } as { [P in K]: Schema.Schema<A, I> }),
  initial: { [key]: initial } as { readonly [P in K]: A }
})

const calls = Middleware.make({ name: "calls", state: sliceOf("calls", Schema.Number, 0) })
const otherCalls = Middleware.make({ name: "otherCalls", state: sliceOf("calls", Schema.String, "") })
const todos = Middleware.make({ name: "todos", state: sliceOf("todos", Schema.Array(Schema.String), []) })
const moreTodos = Middleware.make({ name: "moreTodos", state: sliceOf("todos", Schema.Array(Schema.String), []) })
const sneaky = Middleware.make({ name: "sneaky", state: sliceOf("messages", Schema.Number, 0) })

describe("AgentState.Of", () => {
  test("the merged state displays as one flat object", () => {
    expect<AgentState.Of<readonly [typeof calls, typeof todos]>>().type.toBe<{
      readonly messages: ReadonlyArray<Prompt.Message>
      readonly calls: number
      readonly todos: ReadonlyArray<string>
    }>()
  })

  test("without slices it is the messages", () => {
    expect<AgentState.Of<readonly []>>().type.toBe<{ readonly messages: ReadonlyArray<Prompt.Message> }>()
    expect<AgentState.Of<readonly [Middleware.Middleware]>>().type.toBe<
      { readonly messages: ReadonlyArray<Prompt.Message> }
    >()
  })

  test("an agent's run result carries the flat state", () => {
    type Service = Effect.Effect.Success<ReturnType<typeof Agent.make<readonly [typeof calls, typeof todos]>>>
    expect<Effect.Effect.Success<ReturnType<Service["run"]>>["state"]>().type.toBe<{
      readonly messages: ReadonlyArray<Prompt.Message>
      readonly calls: number
      readonly todos: ReadonlyArray<string>
    }>()
  })

  test("an untyped list of middleware keeps an untyped state", () => {
    expect<AgentState.Of<ReadonlyArray<Middleware.Any>>>().type.toBe<any>()
  })
})

describe("state keys declared by two middleware", () => {
  test("are a compile error of Agent.make naming the key", () => {
    expect(Agent.make({ middleware: [todos, moreTodos] })).type.toRaiseError(
      /state key \\"todos\\" is declared by two middleware/
    )
    expect(Agent.make({ middleware: [calls, todos, otherCalls] })).type.toRaiseError(
      /state key \\"calls\\" is declared by two middleware/
    )
  })

  test("are a compile error of Agent.layer naming the key", () => {
    expect(Agent.layer({ middleware: [todos, moreTodos] })).type.toRaiseError(
      /state key \\"todos\\" is declared by two middleware/
    )
  })

  test("the reserved key messages is a compile error", () => {
    expect(Agent.make({ middleware: [sneaky] })).type.toRaiseError(
      /state key \\"messages\\" is the agent's conversation/
    )
  })

  test("distinct keys, and middleware without state, compile", () => {
    expect(Agent.make({ middleware: [calls, Middleware.make({ name: "a" }), todos, Middleware.make({ name: "b" })] }))
      .type
      .not.toRaiseError()
  })

  test("CheckKeys names the key", () => {
    expect<AgentState.CheckKeys<readonly [typeof todos, typeof moreTodos]>>().type.toBe<
      `state key "todos" is declared by two middleware`
    >()
    expect<AgentState.CheckKeys<readonly [typeof calls, typeof todos]>>().type.toBe<unknown>()
  })

  test("a list that is not a tuple is left to the run-time check", () => {
    const list: ReadonlyArray<typeof todos> = [todos, moreTodos]
    expect(Agent.make({ middleware: list })).type.not.toRaiseError()
  })
})

describe("a hook's update", () => {
  const slice = sliceOf("calls", Schema.Number, 0)

  test("with a key the slice does not declare is a compile error naming the key", () => {
    expect(Middleware.make({
      name: "counter",
      state: slice,
      beforeModel: ({ state }) => Effect.succeed({ state: { calls: state.calls + 1, cals: 0 } })
    })).type.toRaiseError(
      /state key \\"cals\\" is not declared by this middleware's state/
    )
    expect(Middleware.make({
      name: "counter",
      state: slice,
      afterModel: ({ state }) => Effect.succeed(state.calls > 1 ? { state: { calls: 0, cals: 0 } } : undefined)
    })).type.toRaiseError(
      /state key \\"cals\\" is not declared by this middleware's state/
    )
    expect(Middleware.make({
      name: "counter",
      state: slice,
      afterAgent: ({ state }) =>
        Effect.gen(function*() {
          if (state.calls > 1) return { state: { calls: 0, cals: 0 } }
          return undefined
        })
    })).type.toRaiseError(
      /state key \\"cals\\" is not declared by this middleware's state/
    )
  })

  test("of a middleware without state is a compile error naming the key", () => {
    expect(Middleware.make({ name: "stateless", beforeAgent: () => Effect.succeed({ state: { calls: 0 } }) })).type
      .toRaiseError(
        /state key \\"calls\\" is not declared by this middleware's state/
      )
  })

  test("with only the slice's keys compiles", () => {
    expect(Middleware.make({
      name: "counter",
      state: slice,
      canJumpTo: ["end"],
      beforeAgent: ({ state }) =>
        Effect.succeed(state.calls > 1 ? { state: { calls: 0 }, jumpTo: "end" as const } : undefined),
      afterAgent: () => Effect.void
    })).type.toBe<Middleware.Middleware<{ readonly calls: number }, never, never, never>>()
  })

  test("CheckUpdate names the key", () => {
    type Hook = () => Effect.Effect<{ state: { cals: number } }>
    expect<Middleware.CheckUpdate<{ readonly calls: number }, Hook>>().type.toBe<
      `state key "cals" is not declared by this middleware's state`
    >()
    expect<Middleware.CheckUpdate<{ readonly calls: number }, () => Effect.Effect<void>>>().type.toBe<unknown>()
  })
})
