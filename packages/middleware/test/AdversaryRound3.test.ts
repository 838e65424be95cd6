/**
 * Round-3 adversarial variants (issue 33) of the middleware: streamed
 * redaction under other chunkings and stacks (item 3), and texts cut for
 * the model (offload previews, long lines) that must keep characters whole
 * (item 12's round trip).
 */
import type { AiError, Response } from "@effect/ai"
import { LanguageModel } from "@effect/ai"
import { assert, describe, it } from "@effect/vitest"
import { Agent, AgentEvent } from "@stepwise-agent/core"
import { Chunk, Effect, Either, FastCheck, Layer, Stream } from "effect"
import * as Filesystem from "../src/Filesystem.js"
import * as Offload from "../src/Offload.js"
import * as Pii from "../src/Pii.js"

const usage = { inputTokens: 1, outputTokens: 1, totalTokens: 2 }
const finish: Response.StreamPartEncoded = { type: "finish", reason: "stop", usage }

const textChunks = (id: string, chunks: ReadonlyArray<string>): Array<Response.StreamPartEncoded> => [
  { type: "text-start", id },
  ...chunks.map((delta): Response.StreamPartEncoded => ({ type: "text-delta", id, delta })),
  { type: "text-end", id }
]

/** A model that streams `parts` once. */
const streaming = (parts: ReadonlyArray<Response.StreamPartEncoded>) =>
  Effect.provide(Layer.effect(
    LanguageModel.LanguageModel,
    LanguageModel.make({
      generateText: () => Effect.dieMessage("this model only streams"),
      streamText: () => Stream.fromIterable(parts) as Stream.Stream<Response.StreamPartEncoded, AiError.AiError>
    })
  ))

const deltasOf = (events: ReadonlyArray<AgentEvent.AgentEvent<any>>) =>
  events.filter(AgentEvent.$is("TextDelta")).map((event) => event.delta)

/** Runs `run` while a 10 ms timer ticks; gives its result, the longest gap between ticks and the ticks. */
const watchingTheLoop = <A, E, R>(run: Effect.Effect<A, E, R>) =>
  Effect.gen(function*() {
    let tick = performance.now()
    let ticks = 0
    let longest = 0
    const timer = setInterval(() => {
      const now = performance.now()
      longest = Math.max(longest, now - tick)
      tick = now
      ticks++
    }, 10)
    const started = performance.now()
    const result = yield* run.pipe(Effect.ensuring(Effect.sync(() => clearInterval(timer))))
    const total = performance.now() - started
    longest = Math.max(longest, performance.now() - tick)
    return { result, longest, ticks, total }
  })

/** Whether `text` starts with the second half of a surrogate pair or ends with a first half. */
const splitsACharacter = (text: string) => /^[\udc00-\udfff]/.test(text) || /[\ud800-\udbff]$/.test(text)

describe("item 3: streamed redaction, other chunkings", () => {
  it.effect("two Pii stacked over 64 KB of base64 in 1-character pieces keep the event loop turning", () => {
    let seed = 11
    const bytes = Uint8Array.from({ length: 48 * 1024 }, () => (seed = (seed * 1103515245 + 12345) % 2147483648) >> 23)
    const base64 = Buffer.from(bytes).toString("base64")
    return Effect.gen(function*() {
      const agent = yield* Agent.make({
        middleware: [
          Pii.middleware({ types: Pii.builtinTypes, applyToInput: false, applyToOutput: true }),
          Pii.middleware({
            name: "Pii2",
            types: [{ name: "token", pattern: /tok_[A-Za-z0-9]{8,}/ }],
            applyToInput: false,
            applyToOutput: true
          })
        ]
      })
      const { longest, result, ticks, total } = yield* watchingTheLoop(
        Effect.map(Stream.runCollect(agent.stream("hi", { threadId: "t" })), Chunk.toArray)
      )
      assert.isAtLeast(ticks, 10, `ticked ${ticks} in ${Math.round(total)} ms`)
      assert.isBelow(longest, Math.max(1000, total / 4), `the event loop was kept for ${Math.round(longest)} ms`)
      assert.strictEqual(deltasOf(result).join(""), base64)
    }).pipe(streaming([...textChunks("t0", [...base64]), finish]))
  }, 120_000)

  it.effect("one 2 MB chunk without a break is redacted without keeping the event loop for long", () => {
    const text = "QUJD".repeat(512 * 1024)
    return Effect.gen(function*() {
      const agent = yield* Agent.make({
        middleware: [Pii.middleware({ types: Pii.builtinTypes, applyToInput: false, applyToOutput: true })]
      })
      const { longest, result } = yield* watchingTheLoop(
        Effect.map(Stream.runCollect(agent.stream("hi", { threadId: "t" })), Chunk.toArray)
      )
      assert.isBelow(longest, 3000, `the event loop was kept for ${Math.round(longest)} ms`)
      assert.strictEqual(deltasOf(result).join(""), text)
    }).pipe(streaming([...textChunks("t0", [text]), finish]))
  }, 120_000)

  it.effect("text of emoji and letters without spaces: every streamed delta is whole characters", () => {
    const pieces = Array.from({ length: 6000 }, () => "a😀")
    return Effect.gen(function*() {
      const agent = yield* Agent.make({
        middleware: [Pii.middleware({ types: Pii.builtinTypes, applyToInput: false, applyToOutput: true })]
      })
      const events = yield* Effect.map(Stream.runCollect(agent.stream("hi", { threadId: "t" })), Chunk.toArray)
      const deltas = deltasOf(events)
      assert.strictEqual(deltas.join(""), pieces.join(""))
      assert.deepStrictEqual(deltas.filter(splitsACharacter).length, 0, "deltas cut inside a surrogate pair")
    }).pipe(streaming([...textChunks("t0", pieces), finish]))
  }, 60_000)

  it.effect("Pii.redactStream piped into UTF-8 bytes keeps every emoji (no release ends inside a character)", () =>
    Effect.gen(function*() {
      const redacting = Either.getOrThrow(Pii.redactor({ types: Pii.builtinTypes }))
      const text = "a😀".repeat(6000)
      const bytes = yield* Stream.fromIterable(text.match(/.{1,8}/gsu)!).pipe(
        Pii.redactStream(redacting),
        Stream.encodeText,
        Stream.runCollect,
        Effect.map((chunks) => Buffer.concat(Chunk.toArray(chunks)))
      )
      assert.isTrue(bytes.equals(Buffer.from(text)), "the UTF-8 bytes differ (a character was split and replaced)")
    }))

  it.prop(
    "the stream redactor never releases half a character, whatever the chunking of whole characters",
    [
      FastCheck.array(FastCheck.constantFrom("a", "😀", "𝒳", "9", "é"), { minLength: 20000, maxLength: 30000 }),
      FastCheck.integer({ min: 1, max: 40 })
    ],
    ([characters, size]) => {
      const redactor = Either.getOrThrow(Pii.streamRedactor({ types: Pii.builtinTypes }))
      let state = redactor.initial
      const released: Array<string> = []
      for (let at = 0; at < characters.length; at += size) {
        const step = redactor.push(state, characters.slice(at, at + size).join(""))
        state = step.state
        released.push(step.text)
      }
      released.push(redactor.flush(state).text)
      assert.deepStrictEqual(released.filter(splitsACharacter), [])
    },
    { fastCheck: { numRuns: 15, endOnFailure: true } }
  )
})

/** Whether `text` holds half a surrogate pair anywhere (a provider may refuse such a text). */
const hasLoneSurrogate = (text: string) =>
  /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/.test(text)

describe("texts the middleware cut for the model never split a character", () => {
  it("Offload's preview keeps every emoji whole, at either parity of the cut", () => {
    for (const previewChars of [100, 101]) {
      const shown = Offload.referenceText("😀".repeat(5000), "ofl_0123456789abcdef", previewChars)
      assert.isFalse(hasLoneSurrogate(shown), `previewChars ${previewChars}`)
    }
    // text without pairs is cut exactly as before
    assert.include(Offload.referenceText("ab".repeat(500), "ofl_0123456789abcdef", 3), "\naba\n")
  })

  it("read_file's cut of a long line keeps every emoji whole", () => {
    for (const pad of ["", "a"]) {
      const shown = Filesystem.numberedLines(pad + "😀".repeat(Filesystem.maxLineLength), 0, 10)
      assert.isFalse(hasLoneSurrogate(shown), `pad "${pad}"`)
      assert.include(shown, "... (line cut)")
    }
  })
})
