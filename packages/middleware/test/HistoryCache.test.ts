import { Prompt } from "@effect/ai"
import { assert, describe, it } from "@effect/vitest"
import * as TokenCounter from "@stepwise-agent/core/TokenCounter"
import { Effect, FastCheck } from "effect"
import * as HistoryCache from "../src/internal/fast/historyCache.js"

// ---------------------------------------------------------------------------
// helpers
// ---------------------------------------------------------------------------

const user = (text: string) => Prompt.makeMessage("user", { content: [Prompt.makePart("text", { text })] })

/** A cache whose sessions carry no state of their own. */
const recording = () => HistoryCache.make<undefined>({ init: () => undefined, truncate: () => {} })

interface Seen {
  readonly session: HistoryCache.Session<undefined>
  readonly seen: ReadonlyArray<Prompt.Message>
  readonly sums: ReadonlyArray<number>
}

/** What `f` of `use` sees, copied (the session goes on changing). */
const look = (
  cache: HistoryCache.HistoryCache<undefined>,
  counter: TokenCounter.Service,
  messages: ReadonlyArray<Prompt.Message>
) =>
  cache.use(counter, messages, (session) =>
    Effect.succeed<Seen>({
      session,
      seen: session.last.slice(0, session.length),
      sums: [...session.sums]
    }))

/** Running sums of the raw counts of `messages`, measured from scratch by another counter. */
const scratchSums = (messages: ReadonlyArray<Prompt.Message>) =>
  Effect.gen(function*() {
    const counter = yield* TokenCounter.makeApproximate()
    const counts = yield* counter.measure(messages)
    const sums = [0]
    for (const count of counts) sums.push(sums[sums.length - 1]! + count)
    return sums
  })

const assertMatches = (seen: Seen, messages: ReadonlyArray<Prompt.Message>, sums: ReadonlyArray<number>) => {
  assert.strictEqual(seen.seen.length, messages.length)
  for (let i = 0; i < messages.length; i++) assert.strictEqual(seen.seen[i], messages[i])
  assert.deepStrictEqual(seen.sums, sums)
}

// ---------------------------------------------------------------------------
// arbitraries
// ---------------------------------------------------------------------------

const text = FastCheck.string({ maxLength: 120 })

/** How a thread's history changes between two model calls. */
type Change =
  | { readonly _tag: "grow"; readonly texts: ReadonlyArray<string> }
  | { readonly _tag: "edit"; readonly at: number }
  | { readonly _tag: "truncate"; readonly at: number }
  | { readonly _tag: "replace"; readonly texts: ReadonlyArray<string> }
  | { readonly _tag: "seed"; readonly texts: ReadonlyArray<string> }

const change: FastCheck.Arbitrary<Change> = FastCheck.oneof(
  {
    weight: 4,
    arbitrary: FastCheck.record({
      _tag: FastCheck.constant("grow" as const),
      texts: FastCheck.array(text, { maxLength: 5 })
    })
  },
  { weight: 1, arbitrary: FastCheck.record({ _tag: FastCheck.constant("edit" as const), at: FastCheck.nat() }) },
  { weight: 1, arbitrary: FastCheck.record({ _tag: FastCheck.constant("truncate" as const), at: FastCheck.nat() }) },
  {
    weight: 1,
    arbitrary: FastCheck.record({
      _tag: FastCheck.constant("replace" as const),
      texts: FastCheck.array(text, { minLength: 1, maxLength: 5 })
    })
  },
  {
    weight: 1,
    arbitrary: FastCheck.record({
      _tag: FastCheck.constant("seed" as const),
      texts: FastCheck.array(text, { maxLength: 3 })
    })
  }
)

/** The next history; a `seed` change is the current one with a summary-like message in front of its tail. */
const next = (messages: ReadonlyArray<Prompt.Message>, change: Change): ReadonlyArray<Prompt.Message> => {
  switch (change._tag) {
    case "grow":
      return [...messages, ...change.texts.map(user)]
    case "edit": {
      const at = change.at % messages.length
      return messages.map((message, i) => i === at ? { ...message } as Prompt.Message : message)
    }
    case "truncate":
      return messages.slice(0, 1 + change.at % messages.length)
    case "replace":
      return change.texts.map(user)
    case "seed":
      return [messages[0]!, user("summary"), ...messages.slice(1).slice(-1), ...change.texts.map(user)]
  }
}

const propertyOptions = { fastCheck: { numRuns: 100 } }

// ---------------------------------------------------------------------------
// properties
// ---------------------------------------------------------------------------

describe("HistoryCache", () => {
  it.effect.prop(
    "for any growing, edited, truncated, replaced or seeded history the cached sums equal sums from scratch",
    {
      first: FastCheck.array(text, { minLength: 1, maxLength: 6 }),
      changes: FastCheck.array(change, { maxLength: 12 })
    },
    ({ changes, first }) =>
      Effect.gen(function*() {
        const cache = recording()
        const counter = yield* TokenCounter.makeApproximate()
        let messages: ReadonlyArray<Prompt.Message> = first.map(user)
        assertMatches(yield* look(cache, counter, messages), messages, yield* scratchSums(messages))
        for (const step of changes) {
          messages = next(messages, step)
          if (step._tag === "seed") {
            // as Summarization does: a rewritten history remembered with raw counts it already knows
            const counts = yield* counter.measure(messages)
            const seeded = cache.seed(counter, messages, (i) => counts[i]!)
            assert.isFalse(seeded.busy)
          }
          assertMatches(yield* look(cache, counter, messages), messages, yield* scratchSums(messages))
        }
      }),
    propertyOptions
  )

  it.effect.prop(
    "concurrent uses of one history never share a session, and each sees right sums",
    {
      texts: FastCheck.array(text, { minLength: 1, maxLength: 12 }),
      cuts: FastCheck.array(FastCheck.nat(), { minLength: 2, maxLength: 6 })
    },
    ({ cuts, texts }) =>
      Effect.gen(function*() {
        const cache = recording()
        const counter = yield* TokenCounter.makeApproximate()
        const messages = texts.map(user)
        // a remembered session, as after an earlier model call of the thread
        yield* look(cache, counter, messages.slice(0, 1))
        const histories = cuts.map((cut) => messages.slice(0, 1 + cut % messages.length))
        const latch = yield* Effect.makeLatch(false)
        let entered = 0
        const seen = yield* Effect.forEach(histories, (history) =>
          cache.use(counter, history, (session) =>
            Effect.gen(function*() {
              const copy: Seen = {
                session,
                seen: session.last.slice(0, session.length),
                sums: [...session.sums]
              }
              if (++entered === histories.length) {
                yield* latch.open
              }
              // every use holds its session until all of them hold one
              yield* latch.await
              return copy
            })), { concurrency: "unbounded" })
        assert.strictEqual(
          new Set(seen.map((s) =>
            s.session
          )).size,
          histories.length
        )
        for (let i = 0; i < histories.length; i++) {
          assertMatches(seen[i]!, histories[i]!, yield* scratchSums(histories[i]!))
        }
        // and the cache is still right afterwards
        assertMatches(yield* look(cache, counter, messages), messages, yield* scratchSums(messages))
      }),
    propertyOptions
  )

  it.effect("a growing history keeps its session and measures only the messages added since the last call", () =>
    Effect.gen(function*() {
      const cache = recording()
      const approximate = yield* TokenCounter.makeApproximate()
      const measured: Array<number> = []
      const counter: TokenCounter.Service = {
        ...approximate,
        measure: (items) => {
          measured.push(items.length)
          return approximate.measure(items)
        }
      }
      const messages = Array.from({ length: 10 }, (_, i) => user(`message ${i}`))
      const first = yield* look(cache, counter, messages.slice(0, 4))
      const second = yield* look(cache, counter, messages.slice(0, 7))
      const third = yield* look(cache, counter, messages)
      const again = yield* look(cache, counter, messages)
      assert.strictEqual(second.session, first.session)
      assert.strictEqual(third.session, first.session)
      assert.strictEqual(again.session, first.session)
      assert.deepStrictEqual(measured, [4, 3, 3])
      assert.isFalse(first.session.busy)
    }))
})
