/**
 * The floor: the cheapest Effect 3 program that does a step's work, on the
 * same fakes and toolkit as our loop (`fakes.ts`). A run of N steps keeps the
 * thread in a plain array; each step
 *
 * 1. calls the model service's `generateText` (or drains its `streamText` in
 *    the calling fiber, as the loop does) with the thread as the prompt and
 *    the toolkit, `disableToolCallResolution`. The service's own method, not
 *    the module's `LanguageModel.streamText`, which looks the service up
 *    inside a `Stream.unwrap` (a stream of streams, run by a child executor);
 * 2. runs the tool's handler on the call's parameters (decoded by
 *    @effect/ai with the tool's schema on the encoded fake, given decoded by
 *    the raw fake) and encodes its result with the tool's success schema, as
 *    our loop does, without `Toolkit.handle`'s span and second pass;
 * 3. appends the two messages (the assistant's tool call, the tool's result)
 *    to the array.
 *
 * Then one more model call answers and its message is appended. No
 * middleware, no checkpoint, no events, no checks: what is left of a step
 * when everything our loop adds is taken away. Figures are per step = run
 * time ÷ N, as for our loop.
 *
 * @since 0.1.0
 */
import type { LanguageModel } from "@effect/ai"
import { Prompt, type Response, type Tool, type Toolkit } from "@effect/ai"
import type { Stream } from "effect"
import { Effect, Layer, Schema } from "effect"
import { encodedModel, makeToolkit, type Mode, type ModelKind, rawModel, type Script, userInput } from "./fakes.js"
import { drainInFiber } from "./fixtures.js"

/**
 * A configuration of the floor.
 *
 * @since 0.1.0
 * @category models
 */
export interface FloorConfig {
  readonly model: ModelKind
  readonly mode: Mode
  /** Model steps that call a tool; the run makes one more model call (the final answer). */
  readonly steps: number
}

/**
 * The floor ready to run: `runOnce` is one whole run, `check` one run
 * returning the thread it built.
 *
 * @since 0.1.0
 * @category models
 */
export interface Floor {
  readonly runOnce: Effect.Effect<void, unknown>
  readonly check: Effect.Effect<ReadonlyArray<Prompt.Message>, unknown>
}

/**
 * Builds the floor of a configuration.
 *
 * @since 0.1.0
 * @category constructors
 */
export const makeFloor = (config: FloorConfig): Effect.Effect<Floor, unknown> =>
  Effect.gen(function*() {
    const script: Script = { toolSteps: config.steps, call: 0 }
    const model = config.model === "encoded" ? yield* encodedModel(script) : rawModel(script)
    const { kit, layer } = makeToolkit(1)
    const context = yield* Layer.build(layer).pipe(Effect.scoped)
    const toolkit = yield* (kit as unknown as Effect.Effect<Toolkit.WithHandler<any>>).pipe(Effect.provide(context))
    const tool = kit.tools["tool_0"] as Tool.Any
    const handler = context.unsafeMap.get(tool.id) as Tool.Handler<string>
    const encodeResult = Schema.encodeUnknown(tool.successSchema as Schema.Schema<unknown, unknown>)
    const handle = (params: unknown) =>
      Effect.flatMap(handler.handler(params) as Effect.Effect<unknown, unknown>, encodeResult)
    const user = Prompt.makeMessage("user", { content: [Prompt.makePart("text", { text: userInput })] })
    // the reply's parts: the response's content, or the parts drained from the stream
    const reply = (thread: ReadonlyArray<Prompt.Message>): Effect.Effect<ReadonlyArray<Response.AnyPart>, unknown> => {
      const options: any = { prompt: Prompt.fromMessages(thread), toolkit, disableToolCallResolution: true }
      if (config.mode === "generate") {
        return Effect.map(
          model.generateText(options) as Effect.Effect<LanguageModel.GenerateTextResponse<any>, unknown>,
          (response) => response.content
        )
      }
      return Effect.suspend(() => {
        const parts: Array<Response.AnyPart> = []
        const stream = model.streamText(options) as Stream.Stream<Response.AnyPart, unknown>
        return Effect.as(
          drainInFiber(stream, (chunk) => {
            for (const part of chunk) parts.push(part)
          }),
          parts
        )
      })
    }
    const step = (thread: Array<Prompt.Message>): Effect.Effect<boolean, unknown> =>
      Effect.flatMap(reply(thread), (parts) => {
        const call = parts.find((part): part is Response.ToolCallPart<string, unknown> => part.type === "tool-call")
        if (call === undefined) {
          let text = ""
          for (const part of parts) {
            if (part.type === "text") text += part.text
            else if (part.type === "text-delta") text += part.delta
          }
          thread.push(Prompt.makeMessage("assistant", { content: [Prompt.makePart("text", { text })] }))
          return Effect.succeed(false)
        }
        return Effect.map(handle(call.params), (result) => {
          const id = call.id
          const name = call.name
          thread.push(
            Prompt.makeMessage("assistant", {
              content: [Prompt.makePart("tool-call", { id, name, params: call.params, providerExecuted: false })]
            }),
            Prompt.makeMessage("tool", {
              content: [Prompt.makePart("tool-result", { id, name, result, isFailure: false, providerExecuted: false })]
            })
          )
          return true
        })
      })
    const run = Effect.suspend(() => {
      script.call = 0
      const thread: Array<Prompt.Message> = [user]
      const loop: Effect.Effect<ReadonlyArray<Prompt.Message>, unknown> = Effect.flatMap(
        step(thread),
        (more) => more ? loop : Effect.succeed(thread)
      )
      return loop
    })
    return { runOnce: Effect.asVoid(run), check: run }
  })
