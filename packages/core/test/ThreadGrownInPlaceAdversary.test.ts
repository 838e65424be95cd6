/**
 * An adversarial pass over a thread grown in place (`RunState.unseen`): what
 * anyone outside the run was given (a tool call guard's request, a store's
 * checkpoints, a prompt the model kept, a watcher's state) must never change
 * as the run goes on, and a store never holds a reply that was not saved.
 */
import { LanguageModel, Prompt, Response } from "@effect/ai"
import { assert, describe, it } from "@effect/vitest"
import { Agent, Checkpointer, Middleware } from "@stepwise-agent/core"
import { Chunk, Effect, Exit, FastCheck, Layer, Option, Schema, Stream } from "effect"
import { Calculator } from "./utils.js"

const usage = new Response.Usage({ inputTokens: 1, outputTokens: 1, totalTokens: 2 })

type Messages = ReadonlyArray<Prompt.Message>

/**
 * The parts of reply `i`: `calls` calls of `add` while `i < toolSteps`, then the answer: a text, or (`output`)
 * a call of the structured output tool, with a wrong answer first when `output` is `"repaired"`.
 */
const reply = (
  i: number,
  toolSteps: number,
  calls: number,
  tag: string,
  output: "none" | "valid" | "repaired"
): Array<Response.AnyPart> =>
  (i < toolSteps
    ? [
      ...Array.from({ length: calls }, (_, j) =>
        Response.makePart("tool-call", {
          id: `${tag}c${i}-${j}`,
          name: "add",
          params: { a: i, b: j },
          providerExecuted: false
        })),
      Response.makePart("finish", { reason: "tool-calls", usage })
    ]
    : output !== "none"
    ? [
      Response.makePart("tool-call", {
        id: `${tag}o${i}`,
        name: "final_answer",
        params: { answer: output === "repaired" && i === toolSteps ? "not a number" : i },
        providerExecuted: false
      }),
      Response.makePart("finish", { reason: "tool-calls", usage })
    ]
    : [
      Response.makePart("text", { text: `done after ${i}` }),
      Response.makePart("finish", { reason: "stop", usage })
    ]) as Array<Response.AnyPart>

/**
 * A model that calls `add` (`calls` at once) `toolSteps` times, then answers (see {@link reply}); it hands each
 * prompt to `keep`. Its calls' ids start with `tag`.
 */
const model = (
  toolSteps: number,
  calls: number,
  keep: (prompt: Prompt.Prompt) => void = () => {},
  tag = "",
  output: "none" | "valid" | "repaired" = "none"
) => {
  let call = 0
  return Layer.succeed(
    LanguageModel.LanguageModel,
    {
      generateText: (options: { readonly prompt: Prompt.Prompt }) =>
        Effect.sync(() => {
          keep(options.prompt)
          return new LanguageModel.GenerateTextResponse(
            reply(call++, toolSteps, calls, tag, output) as Array<Response.Part<any>>
          )
        }),
      streamText: (options: { readonly prompt: Prompt.Prompt }) =>
        Stream.suspend(() => {
          keep(options.prompt)
          return Stream.fromIterable(reply(call++, toolSteps, calls, tag, output))
        }),
      generateObject: () => Effect.dieMessage("not used")
    } as unknown as LanguageModel.Service
  )
}

/** Something given out, with the length it had then. */
interface Given {
  readonly messages: Messages
  readonly length: number
}

const given = (messages: Messages): Given => ({ messages, length: messages.length })

/** Asserts that each of `held` kept its length and is a prefix of `final`. */
const unchanged = (held: ReadonlyArray<Given>, final: Messages, what: string) =>
  held.forEach((h, i) => {
    assert.strictEqual(h.messages.length, h.length, `${what} ${i} changed length`)
    h.messages.forEach((message, j) => assert.strictEqual(message, final[j], `${what} ${i}, message ${j}`))
  })

/** An agent with the calculator whose model calls `add` `toolSteps` times, then answers. */
const calculating = (toolSteps: number) => Agent.make({ toolkit: Calculator }).pipe(Effect.provide(model(toolSteps, 1)))

type Made = Effect.Effect.Success<ReturnType<typeof calculating>>

describe("a thread grown in place: an adversary finds nothing that changes", () => {
  it.effect("a tool call guard set around the run keeps the state it was given, read at once or later", () =>
    Effect.promise(() =>
      FastCheck.assert(
        FastCheck.asyncProperty(
          FastCheck.record({
            toolSteps: FastCheck.integer({ min: 1, max: 4 }),
            calls: FastCheck.integer({ min: 1, max: 3 }),
            readNow: FastCheck.array(FastCheck.boolean(), { minLength: 1, maxLength: 4 }),
            stream: FastCheck.boolean()
          }),
          async (plan) => {
            const requests: Array<{ readonly request: Middleware.ToolCallRequest; readonly now: Given | undefined }> =
              []
            // a guard installed around the whole run (not by a `wrapToolCall` hook): the run has no hook at all
            const guard: Middleware.ToolCallGuard = (request) =>
              Effect.sync(() => {
                const now = plan.readNow[requests.length % plan.readNow.length]!
                  ? given((request.state as { readonly messages: Messages }).messages)
                  : undefined
                requests.push({ request, now })
                return Option.none()
              })
            const final = await Effect.runPromise(
              Effect.gen(function*() {
                const agent = yield* Agent.make({ toolkit: Calculator })
                if (!plan.stream) return (yield* agent.run("add", { threadId: "g" })).state.messages
                const events = Chunk.toReadonlyArray(yield* Stream.runCollect(agent.stream("add", { threadId: "g" })))
                return (events.at(-1) as { readonly result: { readonly state: { readonly messages: Messages } } })
                  .result
                  .state.messages
              }).pipe(
                Middleware.guardToolCall(guard),
                Effect.provide(Layer.mergeAll(
                  model(plan.toolSteps, plan.calls),
                  Checkpointer.layerMemory,
                  Calculator.toLayer({ add: ({ a, b }) => Effect.succeed(a + b) })
                ))
              )
            )
            assert.strictEqual(requests.length, plan.toolSteps * plan.calls)
            const held = requests.map(({ now, request }) =>
              now ?? given((request.state as { readonly messages: Messages }).messages)
            )
            // each call of a step was guarded with the thread as its reply left it
            assert.deepStrictEqual(
              held.map((h) => h.length),
              Array.from({ length: plan.toolSteps * plan.calls }, (_, i) => 2 + 2 * Math.floor(i / plan.calls))
            )
            unchanged(held, final, "guard's state")
            assert.strictEqual(final.length, 2 + 2 * plan.toolSteps)
          }
        ),
        { numRuns: 40 }
      )
    ))

  it.effect("a store that keeps what it was given: checkpoints keep their length, a failed run leaves only what it saved", () =>
    Effect.promise(() =>
      FastCheck.assert(
        FastCheck.asyncProperty(
          FastCheck.record({
            runs: FastCheck.array(
              FastCheck.record({
                toolSteps: FastCheck.integer({ min: 0, max: 4 }),
                calls: FastCheck.integer({ min: 1, max: 3 }),
                // the tool call of this step (counted over the run) interrupts the run, after its reply
                interruptAt: FastCheck.option(FastCheck.integer({ min: 0, max: 4 }), { nil: undefined }),
                // how the run ends: a text answer, a structured output (repaired once), or over `maxSteps`
                ending: FastCheck.constantFrom("text", "valid", "repaired", "maxSteps")
              }),
              { minLength: 1, maxLength: 3 }
            ),
            // how the store takes a save: kept as it came, or built at once (`Checkpointer.build`) and kept
            appendOnly: FastCheck.boolean(),
            // which saves the store reads at once (the rest it reads only at the end)
            readNow: FastCheck.array(FastCheck.boolean(), { minLength: 1, maxLength: 4 }),
            stream: FastCheck.boolean()
          }),
          async (plan) => {
            /** Each save: what the store keeps, its length then, and its encoded thread if read then. */
            const saves: Array<{
              readonly deferred: Checkpointer.DeferredCheckpoint | undefined
              readonly whole: Checkpointer.Checkpoint
              readonly length: number
              readonly text: string | undefined
            }> = []
            let last: Checkpointer.Checkpoint | undefined
            const keep = (deferred: Checkpointer.DeferredCheckpoint) =>
              Effect.sync(() => {
                const readNow = plan.readNow[saves.length % plan.readNow.length]!
                const whole = plan.appendOnly && !readNow
                  // a checkpoint whose messages are read only when asked for
                  ? {
                    ...deferred.checkpoint,
                    get messages() {
                      return deferred.messages()
                    }
                  } as Checkpointer.Checkpoint
                  : Checkpointer.build(deferred)
                saves.push({
                  deferred,
                  whole,
                  length: deferred.length,
                  text: readNow ? JSON.stringify(deferred.messages()) : undefined
                })
                last = whole
              })
            const store = Checkpointer.make(
              plan.appendOnly
                ? {
                  load: () => Effect.sync(() => Option.fromNullable(last)),
                  delete: () => Effect.void,
                  append: (_, deferred) => keep(deferred)
                }
                : {
                  load: () => Effect.sync(() => Option.fromNullable(last)),
                  delete: () => Effect.void,
                  save: (_, checkpoint) => keep(Checkpointer.deferred(checkpoint))
                }
            )
            const results: Array<Given> = []
            for (const [r, run] of plan.runs.entries()) {
              let toolStep = 0
              const handlers = Calculator.toLayer({
                add: ({ a, b }) =>
                  Effect.suspend(() =>
                    b === 0 && toolStep++ === run.interruptAt ? Effect.interrupt : Effect.succeed(a + b)
                  )
              })
              const exit = await Effect.runPromiseExit(
                Effect.gen(function*() {
                  const agent = yield* Agent.make({
                    toolkit: Calculator,
                    ...(run.ending === "valid" || run.ending === "repaired"
                      ? { responseFormat: Schema.Struct({ answer: Schema.Number }) }
                      : {}),
                    ...(run.ending === "maxSteps" ? { maxSteps: Math.max(1, run.toolSteps) } : {})
                  })
                  if (!plan.stream) return (yield* agent.run("add", { threadId: "k" })).state.messages
                  const events = Chunk.toReadonlyArray(yield* Stream.runCollect(agent.stream("add", { threadId: "k" })))
                  const end = events.at(-1) as { readonly result: { readonly state: { readonly messages: Messages } } }
                  return end.result.state.messages
                }).pipe(
                  Effect.provide(Layer.mergeAll(
                    model(
                      run.toolSteps,
                      run.calls,
                      undefined,
                      `r${r}`,
                      run.ending === "valid" || run.ending === "repaired" ? run.ending : "none"
                    ),
                    handlers,
                    Layer.succeed(Checkpointer.Checkpointer, store)
                  ))
                )
              )
              if (Exit.isSuccess(exit)) results.push(given(exit.value))
              // the run ended as planned
              const interrupted = run.interruptAt !== undefined && run.interruptAt < run.toolSteps
              const overSteps = run.ending === "maxSteps" && run.toolSteps >= 1
              assert.strictEqual(Exit.isSuccess(exit), !interrupted && !overSteps, `run ${r}: ${exit}`)
              // the store holds what the run's last save held: a failed run's reply is in no save
              const stored = last === undefined ? 0 : last.messages.length
              assert.strictEqual(stored, saves.at(-1)?.length ?? 0)
              if (Exit.isFailure(exit) && run.interruptAt !== undefined && run.interruptAt < run.toolSteps) {
                // the reply whose call was interrupted was never saved
                const interrupted = `r${r}c${run.interruptAt}-`
                assert.isFalse(JSON.stringify(last?.messages ?? []).includes(interrupted), "an unsaved reply is stored")
              }
            }
            const final = JSON.parse(JSON.stringify(last?.messages ?? [])) as Array<unknown>
            saves.forEach((save, i) => {
              const messages = save.whole.messages
              assert.strictEqual(messages.length, save.length, `save ${i}: its messages`)
              if (save.text !== undefined) assert.strictEqual(JSON.stringify(messages), save.text, `save ${i}`)
              if (save.deferred !== undefined) {
                assert.strictEqual(save.deferred.length, save.length, `save ${i}: its length`)
                assert.strictEqual(save.deferred.messages().length, save.length, `save ${i}: messages()`)
                const from = Math.min(1, save.length)
                assert.strictEqual(save.deferred.from(from).length, save.length - from, `save ${i}: from(${from})`)
                assert.strictEqual(save.deferred.from(0).length, save.length, `save ${i}: from(0)`)
              }
              // every save is a prefix of the last (each run goes on from the thread the last one saved)
              assert.deepStrictEqual(JSON.parse(JSON.stringify(messages)), final.slice(0, save.length), `save ${i}`)
            })
            for (const result of results) assert.strictEqual(result.messages.length, result.length)
          }
        ),
        { numRuns: 40 }
      )
    ))

  it.effect("a model that keeps its prompts reads each one, however and whenever, as the call saw it", () =>
    Effect.promise(() =>
      FastCheck.assert(
        FastCheck.asyncProperty(
          FastCheck.record({
            toolSteps: FastCheck.integer({ min: 0, max: 4 }),
            calls: FastCheck.integer({ min: 1, max: 3 }),
            system: FastCheck.boolean(),
            stream: FastCheck.boolean(),
            // what the model does with each prompt at its call (cycled)
            atCall: FastCheck.array(
              FastCheck.constantFrom(
                "nothing",
                "read",
                "freeze",
                "seal",
                "write",
                "replace",
                "spread",
                "make",
                "encode",
                "json"
              ),
              { minLength: 1, maxLength: 4 }
            )
          }),
          async (plan) => {
            const kept: Array<{
              readonly prompt: Prompt.Prompt
              readonly early: Messages | undefined
              /** What the model set its prompt's content to before reading it. */
              readonly replaced: Messages | undefined
            }> = []
            const keep = (prompt: Prompt.Prompt) => {
              const how = plan.atCall[kept.length % plan.atCall.length]!
              let early: Messages | undefined
              let replaced: Messages | undefined
              switch (how) {
                case "read":
                  early = prompt.content
                  break
                case "freeze":
                  early = Object.freeze(prompt).content
                  break
                case "seal":
                  early = Object.seal(prompt).content
                  break
                case "write":
                  // what a model that rewrites its prompt's content in place sees
                  ;(prompt as { content: Messages }).content = prompt.content.slice()
                  early = prompt.content
                  break
                case "replace":
                  // set before it is read, as on any prompt
                  replaced = []
                  ;(prompt as { content: Messages }).content = replaced
                  early = prompt.content
                  break
                case "spread":
                  early = { ...prompt }.content
                  break
                case "make":
                  early = Prompt.make(prompt).content
                  break
                case "encode":
                  early = Schema.decodeSync(Prompt.Prompt)(Schema.encodeSync(Prompt.Prompt)(prompt)).content
                  break
                case "json":
                  early = (JSON.parse(JSON.stringify(prompt)) as { readonly content: Messages }).content
                  break
              }
              kept.push({ prompt, early, replaced })
            }
            const messages = await Effect.runPromise(
              Effect.gen(function*() {
                const agent = yield* Agent.make({
                  toolkit: Calculator,
                  ...(plan.system ? { systemPrompt: "You add." } : {})
                })
                if (!plan.stream) return (yield* agent.run("add", { threadId: "p" })).state.messages
                const events = Chunk.toReadonlyArray(yield* Stream.runCollect(agent.stream("add", { threadId: "p" })))
                return (events.at(-1) as { readonly result: { readonly state: { readonly messages: Messages } } })
                  .result
                  .state.messages
              }).pipe(
                Effect.provide(Layer.mergeAll(
                  model(plan.toolSteps, plan.calls, keep),
                  Calculator.toLayer({ add: ({ a, b }) => Effect.succeed(a + b) }),
                  Checkpointer.layerMemory
                ))
              )
            )
            const offset = plan.system ? 1 : 0
            assert.deepStrictEqual(
              kept.map((k, i) => k.replaced === undefined ? k.prompt.content.length - offset : 1 + 2 * i),
              Array.from({ length: plan.toolSteps + 1 }, (_, i) => 1 + 2 * i)
            )
            kept.forEach((k, i) => {
              if (k.replaced !== undefined) {
                assert.strictEqual(k.prompt.content, k.replaced)
                assert.strictEqual(k.early, k.replaced)
                return
              }
              // read now, after the run: the thread as it was at the call, by any reading
              const readings: ReadonlyArray<Messages> = [
                k.prompt.content,
                { ...k.prompt }.content,
                Prompt.make(k.prompt).content,
                Prompt.merge(k.prompt, Prompt.empty).content,
                Schema.encodeSync(Prompt.Prompt)(k.prompt).content as unknown as Messages
              ]
              for (const content of readings) assert.strictEqual(content.length, offset + 1 + 2 * i, `prompt ${i}`)
              assert.isTrue(Prompt.isPrompt(k.prompt))
              assert.strictEqual(
                (JSON.parse(JSON.stringify(k.prompt)) as { readonly content: Messages }).content.length,
                offset + 1 + 2 * i
              )
              if (k.early !== undefined) {
                assert.strictEqual(k.early.length, k.prompt.content.length, `prompt ${i} read at its call`)
              }
              k.prompt.content.slice(offset).forEach((message, j) => assert.strictEqual(message, messages[j]))
            })
          }
        ),
        { numRuns: 60 }
      )
    ))

  it.effect("a watcher that freezes the state a ModelRequestSent reports reads it as the call saw it", () =>
    Effect.gen(function*() {
      const agent = yield* Agent.make({ toolkit: Calculator }).pipe(Effect.provide(model(3, 2)))
      const events = Chunk.toReadonlyArray(yield* Stream.runCollect(agent.stream("add", { threadId: "w" })))
      const held: Array<Given> = []
      for (const event of events) {
        if (event._tag !== "ModelRequestSent") continue
        // a UI store that freezes what it keeps (as immer does a plain object) before reading it
        const state = Object.freeze(event.state as { readonly messages: Messages })
        held.push(given(state.messages))
        assert.strictEqual(state.messages, state.messages, "a state's messages are one array")
      }
      const end = events.at(-1) as { readonly result: { readonly state: { readonly messages: Messages } } }
      assert.deepStrictEqual(held.map((h) => h.length), [1, 3, 5, 7])
      unchanged(held, end.result.state.messages, "watcher's state")
    }).pipe(
      Effect.provide(Layer.merge(
        Checkpointer.layerMemory,
        Calculator.toLayer({ add: ({ a, b }) => Effect.succeed(a + b) })
      ))
    ))

  it.effect("forks of the thread and steering while the run grows it: forks and results keep what they were given", () =>
    Effect.promise(() =>
      FastCheck.assert(
        FastCheck.asyncProperty(
          FastCheck.record({
            toolSteps: FastCheck.integer({ min: 1, max: 4 }),
            // at each tool call (cycled): nothing, a fork by another agent on the same store, or a steering message
            atCall: FastCheck.array(FastCheck.constantFrom("nothing", "fork", "steer"), { minLength: 1, maxLength: 4 }),
            twoRuns: FastCheck.boolean()
          }),
          async (plan) => {
            const forks: Array<Given & { readonly to: string }> = []
            let calls = 0
            let runner: Made | undefined
            let other: Made | undefined
            const handlers = Calculator.toLayer({
              add: ({ a, b }) =>
                Effect.gen(function*() {
                  const what = plan.atCall[calls % plan.atCall.length]!
                  const k = calls++
                  if (what === "steer") yield* Effect.orDie(runner!.send("t", `steer ${k}`, { mode: "steer" }))
                  if (what === "fork") {
                    const stored = yield* Effect.orDie(runner!.thread("t"))
                    if (Option.isSome(stored)) {
                      const messages = (stored.value.state as { readonly messages: Messages }).messages
                      const at = messages.filter((message) => message.role === "assistant").length
                      const forked = yield* Effect.orDie(other!.fork("t", { to: `f${k}`, at }))
                      forks.push({ ...given(forked.state.messages), to: `f${k}` })
                    }
                  }
                  return a + b
                })
            })
            const results = await Effect.runPromise(
              Effect.gen(function*() {
                runner = yield* calculating(plan.toolSteps)
                other = yield* calculating(0)
                const results: Array<Given> = []
                for (let r = 0; r < (plan.twoRuns ? 2 : 1); r++) {
                  if (r > 0) {
                    runner = yield* calculating(plan.toolSteps)
                  }
                  results.push(given((yield* runner.run(`add ${r}`, { threadId: "t" })).state.messages))
                }
                // each fork as stored now, after the source's runs: as its run left it
                for (const [i, fork] of forks.entries()) {
                  const stored = yield* runner.thread(fork.to)
                  assert.isTrue(Option.isSome(stored), `fork ${i} stored`)
                  const messages = (Option.getOrThrow(stored).state as { readonly messages: Messages }).messages
                  assert.strictEqual(messages.length, fork.length, `fork ${i} as stored`)
                }
                return results
              }).pipe(Effect.provide(Layer.mergeAll(handlers, Checkpointer.layerMemory)))
            )
            const final = results.at(-1)!.messages
            for (const result of results) assert.strictEqual(result.messages.length, result.length)
            const finalText = JSON.parse(JSON.stringify(final)) as Array<unknown>
            forks.forEach((fork, i) => {
              assert.strictEqual(fork.messages.length, fork.length, `fork ${i} changed length`)
              // a fork is the source as stored then, and the fork's own reply
              const source = JSON.parse(JSON.stringify(fork.messages.slice(0, -1))) as Array<unknown>
              assert.deepStrictEqual(source, finalText.slice(0, source.length), `fork ${i}`)
            })
          }
        ),
        { numRuns: 25 }
      )
    ))
})
