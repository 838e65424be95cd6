/**
 * `npm run demo -- --chat`: the demo agent behind an HTTP endpoint speaking
 * the AI SDK's UI message stream protocol, for `useChat` (React, Vue,
 * Svelte). Reading a file needs an approval, which the chat UI answers with
 * `addToolApprovalResponse`. `CHAT_PORT` picks the port (default 3001),
 * `CHAT_ORIGIN` the web page allowed to call it (default
 * `http://localhost:5173`, Vite's dev server). On the scripted model (no
 * `OPENAI_API_KEY`) one conversation is scripted. Every client may use every
 * chat (`UiMessageStream.allowAll`): a demo on your machine, not a server for
 * others.
 *
 * @since 0.1.0
 */
import { HttpMiddleware, HttpRouter, HttpServer } from "@effect/platform"
import { NodeContext, NodeHttpServer, NodeRuntime } from "@effect/platform-node"
import { Agent, UiMessageStream } from "@stepwise-agent/core"
import { HumanInTheLoop } from "@stepwise-agent/middleware"
import { ScriptedModel } from "@stepwise-agent/testing"
import { Config, Console, Effect, Layer } from "effect"
import { createServer } from "node:http"
import * as DemoModel from "./DemoModel.js"
import { DemoToolkit, layerHandlers } from "./DemoTools.js"

const script = [
  ScriptedModel.toolCalls([{ name: "list_files", params: {} }], { text: "Let me see which files you have." }),
  ScriptedModel.toolCalls([{ name: "read_file", params: { path: "shopping-list.txt" } }], {
    text: "I'll read the shopping list."
  }),
  ScriptedModel.text("Your list has bread, milk and cheese on it.")
]

/**
 * The chat endpoint: `POST /api/chat`, CORS open to `origin` only. It lets
 * every client use every chat (`UiMessageStream.allowAll`), as a local demo
 * may; a server others reach must check who may use which chat instead.
 *
 * @example
 * ```ts
 * import { HttpServer } from "@effect/platform"
 * import { NodeHttpServer } from "@effect/platform-node"
 * import { Layer } from "effect"
 * import { createServer } from "node:http"
 * import { chatRouter } from "./chat.js"
 *
 * const ServerLive = HttpServer.serve(chatRouter("http://localhost:5173")).pipe(
 *   Layer.provide(NodeHttpServer.layer(() => createServer(), { port: 3001 }))
 * )
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const chatRouter = (origin: string) =>
  Effect.gen(function*() {
    const approvals = HumanInTheLoop.middleware({
      toolkit: DemoToolkit,
      interruptOn: { read_file: { allowedDecisions: ["approve", "reject"] } }
    })
    const agent = yield* Agent.make({
      toolkit: DemoToolkit,
      systemPrompt: "You answer questions about the user's files, using the tools.",
      middleware: [approvals],
      maxSteps: 12
    })
    return HttpRouter.empty.pipe(
      HttpRouter.post(
        "/api/chat",
        // a local demo: anyone who reaches it may use any chat
        UiMessageStream.toHttpApp(agent, { approvals: HumanInTheLoop.uiApprovals, authorize: UiMessageStream.allowAll })
      ),
      HttpMiddleware.cors({ allowedOrigins: [origin], allowedMethods: ["POST"], allowedHeaders: ["content-type"] })
    )
  }).pipe(Effect.flatMap(HttpServer.serveEffect()))

/**
 * Serves the chat endpoint until stopped.
 *
 * @example
 * ```ts
 * import { main } from "./chat.js"
 *
 * main("data")
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const main = (dataDirectory: string): void =>
  Effect.gen(function*() {
    const port = yield* Config.withDefault(Config.port("CHAT_PORT"), 3001)
    const origin = yield* Config.withDefault(Config.string("CHAT_ORIGIN"), "http://localhost:5173")
    yield* Layer.launch(
      Layer.scopedDiscard(Effect.gen(function*() {
        yield* chatRouter(origin)
        yield* Console.log(
          `Chat endpoint: POST http://127.0.0.1:${port}/api/chat (allowed origin ${origin})\n` +
            `useChat({ transport: new DefaultChatTransport({ api: "http://127.0.0.1:${port}/api/chat" }) })\n` +
            `or: curl -N http://127.0.0.1:${port}/api/chat -H 'content-type: application/json' -d ` +
            `'{"id":"demo","messages":[{"role":"user","parts":[{"type":"text","text":"What is on my list?"}]}]}'`
        )
      })).pipe(
        Layer.provide(NodeHttpServer.layer(() => createServer(), { port, host: "127.0.0.1" })),
        Layer.provide(layerHandlers(dataDirectory)),
        Layer.provide(DemoModel.layer(ScriptedModel.layer(script))),
        Layer.provide(NodeContext.layer)
      )
    )
  }).pipe(NodeRuntime.runMain)
