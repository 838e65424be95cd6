/**
 * Context policies inside the agent loop against the same policy called
 * alone (issue 36, item 2): `ClearToolUses` (under its trigger, the cost of
 * deciding) and the summarization trigger check, on a stored thread of
 * 10,000 messages (the growth histories of `context.ts`: 2 KB tool results).
 *
 * **In the loop**: an agent (raw fake model, one tool, the memory
 * checkpointer) runs on the stored thread, each run answering after a few
 * tool steps, with the policy's middleware wrapped so that its own time is
 * taken: the time of its `beforeModel` and of its `wrapModelCall` up to the
 * model call it passes on and after it returns. A run starts from the stored
 * thread each time, as an app resuming a conversation does: either a thread
 * read fresh from JSON (new objects: nothing is cached, the **cold** first
 * call) or the one stored copy the runs before started from too (its
 * messages decoded once, each run appending its own input after them: a
 * **fork** of what the policy saw on the run before).
 *
 * **Alone**: the same policy, a second instance, called directly (its
 * `beforeModel`, then its `wrapModelCall` with a `next` that answers at
 * once) on the very message arrays the loop passed, in the same order. For
 * the cold first call, a fresh instance on a fresh copy of the thread.
 *
 * @since 0.1.0
 */
import { LanguageModel, Prompt, Response } from "@effect/ai"
import { Agent, AgentState, Checkpointer, Middleware } from "@stepwise-agent/core"
import { ContextEditing, Summarization } from "@stepwise-agent/middleware"
import { Context, Effect, Option } from "effect"
import { performance } from "node:perf_hooks"
import { makeToolkit, rawModel, type Script } from "./fakes.js"
import { median } from "./measure.js"

/**
 * One policy in the loop and alone.
 *
 * @since 0.1.0
 * @category models
 */
export interface LoopRow {
  readonly what: string
  /** Messages of the stored thread. */
  readonly messages: number
  /** Median ms of the policy's first call of a run on a thread read fresh from JSON: in the loop, alone. */
  readonly coldLoopMs: number
  readonly coldAloneMs: number
  /** Median ms of its first call of a run that forks the stored thread it saw before: in the loop, alone. */
  readonly forkLoopMs: number
  readonly forkAloneMs: number
  /** Median µs of its call at each further step of a run: in the loop, alone. */
  readonly stepLoopUs: number
  readonly stepAloneUs: number
}

/** A summarizer never called: the trigger is above every thread. */
const noSummarizer = {
  generateText: () => Effect.dieMessage("the summarization benchmark never summarizes")
} as unknown as LanguageModel.Service

const answer: Middleware.ModelResponse = {
  message: Prompt.makeMessage("assistant", { content: [Prompt.makePart("text", { text: "ok" })] }),
  toolCalls: [],
  usage: new Response.Usage({ inputTokens: undefined, outputTokens: undefined, totalTokens: undefined }),
  finishReason: "stop"
}

/**
 * A policy of the rows: its name and how to make its middleware.
 *
 * @since 0.1.0
 * @category models
 */
export interface Policy {
  readonly what: string
  readonly make: () => Middleware.Any
}

/**
 * The policies measured, the timing's own cost first.
 *
 * @since 0.1.0
 * @category constructors
 */
export const policies: ReadonlyArray<Policy> = [
  {
    // what the timing itself takes: in the loop, the wrapper's own operations; alone, a `runSync`
    what: "pass-through (the timing's own cost)",
    make: () =>
      Middleware.make({ name: "passThrough", wrapModelCall: (request, next) => next(request) }) as Middleware.Any
  },
  {
    what: "ClearToolUses, under the trigger",
    make: () =>
      ContextEditing.middleware({ edits: [ContextEditing.clearToolUses({ trigger: 1e9, keep: 3 })] }) as Middleware.Any
  },
  {
    what: "summarization trigger check",
    make: () =>
      Summarization.middleware({ trigger: { tokens: 1_000_000_000 }, keep: { messages: 20 } }) as Middleware.Any
  }
]

/**
 * The services the policies' agents need (a summarizer never called).
 *
 * @since 0.1.0
 * @category constructors
 */
export const services = Context.make(Summarization.Summarizer, noSummarizer)

/**
 * A policy's middleware, built.
 *
 * @since 0.1.0
 * @category constructors
 */
export const build = (policy: Policy): Promise<Middleware.Any> =>
  Effect.runPromise(Middleware.build(policy.make()) as Effect.Effect<Middleware.Any>)

/**
 * `mw` with its own time in each model call recorded: the messages it was
 * given and the ms of its hooks, the model call they pass on left out.
 */
const timed = (
  mw: Middleware.Any,
  calls: Array<{ readonly messages: ReadonlyArray<Prompt.Message>; ms: number }>
): Middleware.Any => {
  let current: { readonly messages: ReadonlyArray<Prompt.Message>; ms: number } | undefined
  const callOf = (messages: ReadonlyArray<Prompt.Message>) => {
    if (current === undefined) {
      current = { messages, ms: 0 }
      calls.push(current)
    }
    return current
  }
  const before = mw.beforeModel
  const wrap = mw.wrapModelCall
  return {
    ...mw,
    ...(before === undefined ? {} : {
      beforeModel: (context: any) =>
        Effect.suspend(() => {
          const call = callOf(context.messages)
          const started = performance.now()
          // (`map`, not `ensuring`: a hook that fails fails the run, and `ensuring`'s own ~9 operations would be
          // taken as the policy's)
          return Effect.map(before(context), (update) => {
            call.ms += performance.now() - started
            // (a middleware without `wrapModelCall` is done with this model call)
            if (wrap === undefined) current = undefined
            return update
          })
        })
    }),
    ...(wrap === undefined ? {} : {
      wrapModelCall: (request: any, next: any) =>
        Effect.suspend(() => {
          const call = callOf(request.messages)
          let started = performance.now()
          const passOn = (r: any): Effect.Effect<any, any> =>
            Effect.suspend(() => {
              call.ms += performance.now() - started
              return Effect.map(next(r), (response) => {
                started = performance.now()
                return response
              })
            })
          return Effect.map(wrap(request, passOn), (response) => {
            call.ms += performance.now() - started
            current = undefined
            return response
          })
        })
    })
  } as Middleware.Any
}

/**
 * Calls `mw`'s hooks on `messages` as the loop would; returns their ms.
 * (They need no service: the summarizer is never called, and no hook of
 * these policies opens a scope.)
 *
 * @since 0.1.0
 * @category utility
 */
export const callAlone = (mw: Middleware.Any, messages: ReadonlyArray<Prompt.Message>, step: number): number => {
  const started = performance.now()
  let stored = messages
  if (mw.beforeModel !== undefined) {
    const update: any = Effect.runSync(
      mw.beforeModel({
        state: {},
        messages,
        threadId: "bench",
        usage: { inputTokens: 0, outputTokens: 0, totalTokens: 0 },
        step,
        tools: [],
        resume: Option.none()
      } as any) as Effect.Effect<any>
    )
    if (update?.messages !== undefined) stored = update.messages
  }
  if (mw.wrapModelCall !== undefined) {
    Effect.runSync(
      mw.wrapModelCall({
        messages: stored,
        systemPrompt: undefined,
        tools: [],
        toolChoice: "auto",
        model: undefined,
        context: Context.empty(),
        state: { messages: stored } as any,
        threadId: "bench",
        step
      }, () => Effect.succeed(answer)) as Effect.Effect<any>
    )
  }
  return performance.now() - started
}

/**
 * Measures each policy in the loop and alone (see the module), on a stored
 * thread of `messages` (built by `thread`), `runs` runs of `steps` tool
 * steps each after warm-up runs.
 *
 * @since 0.1.0
 * @category constructors
 */
export const measureInLoop = async (options: {
  readonly thread: (size: number) => ReadonlyArray<Prompt.Message>
  readonly messages?: number | undefined
  readonly runs: number
  readonly steps: number
  readonly log: (line: string) => void
}): Promise<ReadonlyArray<LoopRow>> => {
  const size = options.messages ?? 10_000
  const { runs, steps } = options
  const stored = options.thread(size)
  const json = JSON.stringify({
    version: 1,
    threadId: "bench",
    messages: AgentState.encodeMessages(stored),
    slices: {}
  })
  const input = "And tomorrow?"
  const rows: Array<LoopRow> = []
  for (const policy of policies) {
    const calls: Array<{ readonly messages: ReadonlyArray<Prompt.Message>; ms: number }> = []
    const script: Script = { toolSteps: 0, call: 0 }
    const checkpointer = await Effect.runPromise(Checkpointer.makeMemory)
    const { kit, layer } = makeToolkit(1)
    const agent = await Effect.runPromise(
      Agent.make({ toolkit: kit as any, middleware: [timed(await build(policy), calls)], maxSteps: steps + 1 }).pipe(
        Effect.provide(layer),
        Effect.provideService(LanguageModel.LanguageModel, rawModel(script)),
        Effect.provideService(Checkpointer.Checkpointer, checkpointer),
        Effect.provide(services)
      ) as Effect.Effect<Agent.AgentOf<ReadonlyArray<Middleware.Any>>>
    )
    const copy = JSON.parse(json)
    /** One run from the stored thread: a fresh copy of it, or the one copy. */
    const run = async (fresh: boolean, toolSteps: number) => {
      await Effect.runPromise(checkpointer.save("bench", fresh ? JSON.parse(json) : copy))
      script.call = 0
      script.toolSteps = toolSteps
      const from = calls.length
      const result = await Effect.runPromise(agent.run(input, { threadId: "bench" }))
      if (result._tag !== "Completed") throw new Error(`the run ended as ${result._tag}`)
      return calls.slice(from)
    }
    // alone: a second instance, called on the loop's arrays right after each run, in the same order (the two
    // interleaved, so that both see the same load); for the cold first call, a fresh instance on a fresh copy
    const alone = await build(policy)
    const replay = async (calls: ReadonlyArray<{ readonly messages: ReadonlyArray<Prompt.Message> }>) =>
      calls.map((call, k) => callAlone(alone, call.messages, k))
    const coldAloneOnce = async () => {
      const messages = Effect.runSync(AgentState.decodeMessages(JSON.parse(json).messages)).concat([
        Prompt.makeMessage("user", { content: [Prompt.makePart("text", { text: input })] })
      ])
      return callAlone(await build(policy), messages, 0)
    }
    // warm up: a few runs of each kind
    for (let i = 0; i < 3; i++) {
      await run(true, 0)
      await coldAloneOnce()
      await replay(await run(false, steps))
    }
    const cold: Array<number> = []
    const coldAlone: Array<number> = []
    const forkRuns: Array<ReadonlyArray<{ readonly messages: ReadonlyArray<Prompt.Message>; ms: number }>> = []
    const forkAlone: Array<number> = []
    const stepAlone: Array<number> = []
    for (let i = 0; i < runs; i++) {
      cold.push((await run(true, 0))[0]!.ms)
      coldAlone.push(await coldAloneOnce())
      const calls = await run(false, steps)
      forkRuns.push(calls)
      const [first, ...rest] = await replay(calls)
      forkAlone.push(first!)
      stepAlone.push(...rest)
    }
    calls.length = 0
    const loopSteps = forkRuns.flatMap((calls) => calls.slice(1).map((call) => call.ms))
    const row: LoopRow = {
      what: policy.what,
      messages: size,
      coldLoopMs: median(cold),
      coldAloneMs: median(coldAlone),
      forkLoopMs: median(forkRuns.map((calls) => calls[0]!.ms)),
      forkAloneMs: median(forkAlone),
      stepLoopUs: median(loopSteps) * 1000,
      stepAloneUs: median(stepAlone) * 1000
    }
    rows.push(row)
    options.log(
      `  ${policy.what.padEnd(34)} N=${size}  cold first call: loop ${row.coldLoopMs.toFixed(2)} ms, alone ${
        row.coldAloneMs.toFixed(2)
      } ms; first call of a run on the stored thread: loop ${row.forkLoopMs.toFixed(3)} ms, alone ${
        row.forkAloneMs.toFixed(3)
      } ms; step: loop ${row.stepLoopUs.toFixed(1)} µs, alone ${row.stepAloneUs.toFixed(1)} µs`
    )
  }
  return rows
}
