/**
 * The tool step of a run: each pending call through the `wrapToolCall`
 * chain, journaled as the run's step, with bounded concurrency. A call of a
 * tool the model call did not offer, or that the agent does not have, or
 * whose arguments are invalid, is answered with a failed result the model
 * can read; a call that timed out too. `invalidCall` finds such calls in a
 * reply, for the loop's count of repair rounds.
 */
import type * as Prompt from "@effect/ai/Prompt"
import * as Effect from "effect/Effect"
import * as FiberRef from "effect/FiberRef"
import * as Option from "effect/Option"
import { InvalidToolCalls, ToolTimeout } from "../AgentError.js"
import type * as Middleware from "../Middleware.js"
import { CurrentToolCallGuards } from "../Middleware.js"
import type * as RunJournal from "../RunJournal.js"
import type { Compiled } from "./config.js"
import { checked, hookEffect, toolResultProblem } from "./hookResults.js"
import * as Observer from "./observer.js"
import { journaled, perRun, type RunContext } from "./runContext.js"
import type { RunState } from "./runState.js"
import { timedOutResult, unknownToolResult } from "./tools.js"

const isToolTimeout = (error: unknown): error is ToolTimeout => error instanceof ToolTimeout

/** A call of a model reply the agent answers with a failed result for the model to repair, and why. */
export interface InvalidCall {
  readonly call: Prompt.ToolCallPart
  readonly problem: string
}

/** What the tool step gives: a result per call, in call order, and the structured output if a call gave it. */
export interface ToolStepResult {
  readonly results: ReadonlyArray<Prompt.ToolResultPart>
  readonly output: Option.Option<unknown>
}

/**
 * Runs a tool call through the guards the chain installed for it
 * (`Middleware.guardToolCall`, outermost first): the first answer wins, else
 * `run` runs, with no guard left for the tool calls made inside it.
 */
const runGuarded = <E, R>(
  request: Middleware.ToolCallRequest,
  run: Effect.Effect<Prompt.ToolResultPart, E, R>
): Effect.Effect<Prompt.ToolResultPart, E, R> =>
  Effect.flatMap(FiberRef.get(CurrentToolCallGuards), (guards) => {
    if (guards.length === 0) return run
    const unguarded = Effect.locally(run, CurrentToolCallGuards, [])
    const check = (index: number): Effect.Effect<Prompt.ToolResultPart, E, R> =>
      index === guards.length ? unguarded : Effect.flatMap(
        guards[index]!(request),
        Option.match({ onNone: () => check(index + 1), onSome: Effect.succeed })
      )
    return check(0)
  })

export const make = (config: Compiled) => {
  const { output, outputToolName, toolNames, toolsByName, wrapTool } = config

  /**
   * The tool call at the end of the `wrapToolCall` chain; `step.offered` is
   * what the running step's model call offered.
   */
  const callTool = (threadId: string, step: { offered: ReadonlyArray<string> | undefined }) =>
  (
    request: Middleware.ToolCallRequest
  ): Effect.Effect<Prompt.ToolResultPart, any> => {
    const call = request.call
    const offered = step.offered
    if (call.name === outputToolName) return Effect.succeed(output!.answer(call))
    const entry = toolsByName.get(call.name)
    if (entry === undefined) return Effect.succeed(unknownToolResult(call, offered ?? toolNames))
    if (offered !== undefined && !offered.includes(call.name)) return Effect.succeed(unknownToolResult(call, offered))
    // the guards the chain installed check the call as it runs (Middleware.guardToolCall)
    return runGuarded(request, entry.run(call, threadId))
  }

  const toolChain = (run: RunContext, step: { offered: ReadonlyArray<string> | undefined }) =>
    wrapTool.reduceRight<(request: Middleware.ToolCallRequest) => Effect.Effect<Prompt.ToolResultPart, any, any>>(
      (next, m) => (request) =>
        Effect.flatMap(
          Observer.inHook(
            run,
            m.name,
            "wrapToolCall",
            hookEffect(m.name, "wrapToolCall", m.wrapToolCall!(request, next as any))
          ),
          checked(m.name, "wrapToolCall", (result) => toolResultProblem(result, request.call))
        ),
      callTool(run.threadId, step)
    )

  /**
   * The chain of a run (the wrap hooks are the same for every step), and the
   * cell holding what the running step's model call offered.
   */
  const chainOf = perRun((run) => {
    const step: { offered: ReadonlyArray<string> | undefined } = { offered: undefined }
    return { chain: toolChain(run, step), step }
  })

  /**
   * The first call of `reply` the agent will answer as invalid: a tool the
   * call did not offer or the agent does not have, arguments that are not
   * JSON or fail the tool's schema, structured output that does not decode.
   */
  const invalidCall = (reply: RunJournal.ModelCall): InvalidCall | undefined => {
    for (const part of reply.message.content) {
      if (part.type !== "tool-call" || part.providerExecuted) continue
      if (part.name === outputToolName) {
        const answer = output!.answer(part)
        if (answer.isFailure) return { call: part, problem: "the structured output does not match its schema" }
        continue
      }
      const entry = toolsByName.get(part.name)
      if (entry === undefined || !reply.offered.includes(part.name)) {
        return { call: part, problem: "the model has no tool of this name" }
      }
      const problem = entry.problem(part)
      if (problem !== undefined) return { call: part, problem }
    }
    return undefined
  }

  /** Runs `calls`, the pending calls of `state`. */
  const runCalls = (
    run: RunContext,
    state: RunState,
    calls: ReadonlyArray<Prompt.ToolCallPart>
  ): Effect.Effect<ToolStepResult, unknown, any> => {
    // one tool step of a run runs at a time: the cell is this step's until it ends
    const { chain, step } = chainOf(run)
    step.offered = state.offered
    const flat = config.layout.flatten(state)
    const one = (call: Prompt.ToolCallPart) => {
      const request: Middleware.ToolCallRequest = {
        call,
        tool: toolsByName.get(call.name)?.tool ?? (call.name === outputToolName ? output!.tool : undefined),
        state: flat as any,
        threadId: run.threadId,
        step: state.step - 1
      }
      return Observer.toolCall(
        run,
        call,
        journaled(
          run,
          run.keys.tool(call),
          Observer.traced(
            run,
            "Agent.toolCall",
            { tool: call.name, callId: call.id },
            Effect.catchIf(chain(request), isToolTimeout, (error) => Effect.succeed(timedOutResult(call, error)))
          )
        )
      )
    }
    const ended = (results: ReadonlyArray<Prompt.ToolResultPart>): ToolStepResult => {
      let value = Option.none<unknown>()
      if (output !== undefined) {
        for (let i = 0; i < calls.length; i++) {
          const given = output.value(calls[i]!, results[i]!)
          if (Option.isSome(given)) value = given
        }
      }
      return { results, output: value }
    }
    return calls.length === 1
      ? Effect.map(one(calls[0]!), (result) => ended([result]))
      : Effect.map(Effect.forEach(calls, one, { concurrency: config.toolConcurrency }), ended)
  }

  return { invalidCall, run: runCalls }
}

/** The failure of a run whose model sent an invalid call in more replies in a row than `maxToolCallRepairs`. */
export const repairsExhausted = (threadId: string, invalid: InvalidCall, replies: number): InvalidToolCalls =>
  new InvalidToolCalls({
    threadId,
    toolName: invalid.call.name,
    callId: invalid.call.id,
    problem: invalid.problem,
    replies
  })
