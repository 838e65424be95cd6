import type { Response } from "@effect/ai"
import { LanguageModel } from "@effect/ai"
import { describe, it } from "@effect/vitest"
import { Agent } from "@stepwise-agent/core"
import { Effect, Layer, Stream } from "effect"
import { monitorEventLoopDelay } from "node:perf_hooks"
import { randomBytes } from "node:crypto"
import * as Pii from "../src/Pii.js"

const text = randomBytes(384 * 1024).toString("base64")
const model = Layer.effect(LanguageModel.LanguageModel, LanguageModel.make({
  generateText: () => Effect.dieMessage("no"),
  streamText: () => Stream.suspend(() => {
    const parts: Array<Response.StreamPartEncoded> = [{ type: "text-start", id: "t" }]
    for (let i = 0; i < text.length; i += 4) parts.push({ type: "text-delta", id: "t", delta: text.slice(i, i + 4) })
    parts.push({ type: "text-end", id: "t" }, { type: "finish", reason: "stop", usage: { inputTokens: 1, outputTokens: 1, totalTokens: 2 } })
    return Stream.fromIterable(parts)
  })
}))

describe("repro", () => {
  it.effect("stream", () => Effect.gen(function*() {
    const withPii = process.env.NOPII === undefined
    const pii = yield* Pii.middleware({ types: Pii.builtinTypes, applyToOutput: true })
    const agent = yield* Agent.make({ middleware: withPii ? [pii] : [] })
    const h = monitorEventLoopDelay({ resolution: 10 }); h.enable()
    const t0 = Date.now()
    const n = yield* Stream.runCount(agent.stream("hi", { threadId: "t" }))
    h.disable()
    console.log("events", n, "ms", Date.now() - t0, "maxDelay ms", h.max / 1e6)
  }).pipe(Effect.provide(model)), 600_000)
})
