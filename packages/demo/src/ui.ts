/**
 * `npm run demo -- --ui`: the demo run with the agent inspector attached.
 * Prints the inspector's address; open it to follow the run (todos, model
 * and tool calls, what each middleware did) and to answer the approval the
 * run waits for. The demo exits when the run completes. `INSPECTOR_PORT`
 * picks the port (default: one the system picks).
 *
 * @since 0.1.0
 */
import type { Agent } from "@stepwise-agent/core"
import * as Inspector from "@stepwise-agent/inspector/Inspector"
import { Config, Console, Effect, Fiber, Stream } from "effect"

/**
 * Runs `question` on `threadId` with an inspector attached, and waits until
 * the thread's run completes (after the approvals answered in the page).
 *
 * @example
 * ```ts
 * import { Agent } from "@stepwise-agent/core"
 * import { runWithInspector } from "./ui.js"
 * import { Effect } from "effect"
 *
 * const program = Effect.flatMap(
 *   Agent.make({ systemPrompt: "Be brief." }),
 *   (agent) => runWithInspector(agent, { question: "hello", threadId: "demo" })
 * )
 * ```
 *
 * @since 0.1.0
 * @category running
 */
export const runWithInspector = (
  agent: Agent.Service<any, any>,
  options: { readonly question: string; readonly threadId: string }
) =>
  Effect.gen(function*() {
    const port = yield* Config.withDefault(Config.integer("INSPECTOR_PORT"), 0)
    const inspector = yield* Inspector.make(agent, { port })
    yield* Console.log(`Agent inspector: ${inspector.url}\n`)
    const events = yield* agent.watch
    const completed = yield* events.pipe(
      Stream.filter((e) => e.threadId === options.threadId),
      Stream.tap(({ event }) => {
        switch (event._tag) {
          case "RunEnded":
            return event.result._tag === "Interrupted"
              ? Console.log("── the run waits for a decision: answer it in the inspector")
              : Console.log(`Agent: ${event.result.text}`)
          case "RunFailed":
            return Console.log(`── the run failed (${event.error}): ${event.message}`)
          case "ToolCallStarted":
            return Console.log(`   → ${event.call.name}`)
          case "MiddlewareDecision":
            return Console.log(`   [${event.middleware}] ${event.decision}`)
          default:
            return Effect.void
        }
      }),
      Stream.filter(({ event }) => event._tag === "RunEnded" && event.result._tag === "Completed"),
      Stream.runHead,
      Effect.fork
    )
    yield* Console.log(`User: ${options.question}`)
    yield* agent.run(options.question, { threadId: options.threadId })
    yield* Fiber.join(completed)
    yield* Console.log("\nThe run completed; the inspector stops.")
  }).pipe(Effect.scoped)
