/**
 * A step on a long thread does work for the step's new messages only: what
 * the model call does to the thread (pairing calls and results, lifting files
 * out of tool results) reads a thread that extends one it saw before only
 * past where that one ended, and gives what reading the whole thread gives.
 * And the first save of a thread another KeyValueStore checkpointer wrote
 * (a run on a stored thread in a new process) writes the whole chunks it
 * loaded as they were stored, turning only the rest into JSON.
 */
import { Prompt } from "@effect/ai"
import { KeyValueStore } from "@effect/platform"
import { assert, describe, it } from "@effect/vitest"
import { Checkpointer } from "@stepwise-agent/core"
import { Effect, FastCheck, Option } from "effect"
import { vi } from "vitest"
import * as LiftedThreads from "../src/internal/fast/liftedThreads.js"
import * as Lineage from "../src/internal/fast/lineage.js"
import { paired } from "../src/internal/fast/pairing.js"

const png = "iVBORw0KGgo="

const toolMessage = (i: number, withFile: boolean): Prompt.Message =>
  Prompt.makeMessage("tool", {
    content: [
      Prompt.makePart("tool-result", {
        id: `call_${i}`,
        name: "look",
        result: withFile ? [{ type: "file", mediaType: "image/png", data: png }, `result ${i}`] : `result ${i}`,
        isFailure: false,
        providerExecuted: false
      })
    ]
  })

const callMessage = (i: number): Prompt.Message =>
  Prompt.makeMessage("assistant", {
    content: [Prompt.makePart("tool-call", { id: `call_${i}`, name: "look", params: {}, providerExecuted: false })]
  })

/** A message whose `role` counts its reads (a message the lift reads again is read through it). */
const counted = (message: Prompt.Message, reads: { n: number }): Prompt.Message =>
  new Proxy(message, {
    get: (target, key, receiver) => {
      if (key === "role") reads.n++
      return Reflect.get(target, key, receiver)
    }
  })

/** The lift of a copy of `messages` that no lineage record relates to any thread: every message read. */
const liftedAfresh = (messages: ReadonlyArray<Prompt.Message>) => LiftedThreads.lift([...messages])

/** What the model call sends of a thread: paired, then its files lifted. */
const sent = (messages: ReadonlyArray<Prompt.Message>) => LiftedThreads.lift(paired(messages))

/** The same for a copy of `messages` that no lineage record relates to any thread. */
const sentAfresh = (messages: ReadonlyArray<Prompt.Message>) => LiftedThreads.lift(paired([...messages]))

/** A tool message whose result answers no call (as input history may hold). */
const orphan = (i: number) => toolMessage(1_000_000 + i, false)

describe("flat threads: what a model call does to the thread", () => {
  it("reads only the messages a thread added since the thread it extends was lifted", () => {
    const reads = { n: 0 }
    const base: Array<Prompt.Message> = [
      Prompt.makeMessage("user", { content: [Prompt.makePart("text", { text: "go" })] })
    ]
    for (let i = 0; i < 200; i++) base.push(counted(callMessage(i), reads), counted(toolMessage(i, false), reads))
    let thread: ReadonlyArray<Prompt.Message> = base
    LiftedThreads.lift(thread)
    for (let step = 200; step < 210; step++) {
      thread = Lineage.appendWithRoom(thread, [callMessage(step)])
      thread = Lineage.extendUnseen(thread, [toolMessage(step, false)])
      reads.n = 0
      assert.strictEqual(LiftedThreads.lift(thread), thread)
      assert.strictEqual(reads.n, 0, `step ${step} read the thread's earlier messages again`)
    }
  })

  it("continues from the loaded thread on a second run that starts on it", () => {
    const reads = { n: 0 }
    const loaded: Array<Prompt.Message> = []
    for (let i = 0; i < 100; i++) loaded.push(counted(callMessage(i), reads), counted(toolMessage(i, i === 3), reads))
    // two runs on the same loaded thread, each appending its own messages
    for (const run of [0, 1]) {
      const thread = Lineage.appendWithRoom(loaded, [
        Prompt.makeMessage("user", { content: [Prompt.makePart("text", { text: `run ${run}` })] })
      ])
      reads.n = 0
      const lifted = LiftedThreads.lift(thread)
      if (run === 1) assert.strictEqual(reads.n, 0, "the second run read the loaded thread again")
      assert.deepStrictEqual(lifted, liftedAfresh(thread))
    }
  })

  it("reads only a step's new messages of a thread that needed repairs (an orphan result early on)", () => {
    const reads = { n: 0 }
    const base: Array<Prompt.Message> = [
      Prompt.makeMessage("user", { content: [Prompt.makePart("text", { text: "go" })] }),
      counted(orphan(0), reads)
    ]
    for (let i = 0; i < 200; i++) base.push(counted(callMessage(i), reads), counted(toolMessage(i, i === 7), reads))
    let thread: ReadonlyArray<Prompt.Message> = base
    sent(thread)
    for (let step = 200; step < 210; step++) {
      thread = Lineage.appendWithRoom(thread, [callMessage(step)])
      thread = Lineage.extendUnseen(thread, [toolMessage(step, false)])
      reads.n = 0
      const request = sent(thread)
      assert.strictEqual(reads.n, 0, `step ${step} read the thread's earlier messages again`)
      assert.deepStrictEqual(request, sentAfresh(thread))
    }
  })

  it.prop(
    "gives what lifting the whole thread gives, whatever the thread was made from",
    [
      FastCheck.array(
        FastCheck.record({
          op: FastCheck.constantFrom("append", "extend", "replaceLast", "derive"),
          from: FastCheck.nat(),
          keep: FastCheck.nat(),
          files: FastCheck.array(FastCheck.boolean(), { minLength: 1, maxLength: 3 })
        }),
        { minLength: 1, maxLength: 25 }
      )
    ],
    ([ops]) => {
      let id = 0
      // a tool message answering no call, or a call whose result never comes, now and then: repairs
      const fresh = (files: ReadonlyArray<boolean>) =>
        files.map((file, i) => i === 2 ? (file ? orphan(id++) : callMessage(id++)) : toolMessage(id++, file))
      const threads: Array<ReadonlyArray<Prompt.Message>> = [[
        Prompt.makeMessage("user", { content: [Prompt.makePart("text", { text: "go" })] })
      ]]
      for (const { files, from, keep, op } of ops) {
        const base = threads[from % threads.length]!
        const next = op === "append"
          ? Lineage.appendWithRoom(base, fresh(files))
          : op === "extend"
          ? Lineage.extendUnseen(Lineage.appendWithRoom(base, [callMessage(id++)]), fresh(files))
          : op === "replaceLast"
          ? Lineage.replaceLast(base, fresh(files)[0]!)
          : Lineage.derive(base.slice(0, keep % (base.length + 1)).concat(fresh(files)), base, keep % (base.length + 1))
        threads.push(next)
        // lifted in an order unrelated to how they were made
        const probe = threads[(from * 7 + keep) % threads.length]!
        assert.deepStrictEqual(LiftedThreads.lift(probe), liftedAfresh(probe))
        assert.deepStrictEqual(LiftedThreads.lift(next), liftedAfresh(next))
        assert.deepStrictEqual(sent(probe), sentAfresh(probe))
        assert.deepStrictEqual(sent(next), sentAfresh(next))
      }
    }
  )
})

/** A memory `KeyValueStore`, and a checkpointer instance on it each time `open` runs (a new process, as far as it knows). */
const sharedStore = (fails: () => boolean = () => false) =>
  Effect.map(Effect.provide(KeyValueStore.KeyValueStore, KeyValueStore.layerMemory), (store) => {
    const failing = KeyValueStore.make({
      get: store.get,
      getUint8Array: store.getUint8Array,
      set: (key, value) => fails() ? Effect.die(`set ${key} failed`) : store.set(key, value),
      remove: store.remove,
      clear: store.clear,
      size: store.size
    })
    return {
      store,
      open: Checkpointer.makeKeyValueStore().pipe(Effect.provideService(KeyValueStore.KeyValueStore, failing))
    }
  })

const storedMessage = (i: number) => ({
  role: "tool",
  content: [{
    type: "tool-result",
    id: `c${i}`,
    name: "t",
    result: `result ${i} ${"x".repeat(200)}`,
    isFailure: false,
    providerExecuted: false
  }]
})

/** How many times `JSON.stringify` runs during `effect`. */
const stringifyCalls = <A, E>(effect: Effect.Effect<A, E>) =>
  Effect.acquireUseRelease(
    Effect.sync(() => vi.spyOn(JSON, "stringify")),
    (spy) => Effect.map(effect, () => spy.mock.calls.length),
    (spy) => Effect.sync(() => spy.mockRestore())
  )

describe("flat threads: the first save of a thread another KeyValueStore checkpointer wrote", () => {
  it.effect("turns only the new messages into JSON (the whole chunks it loaded are copied as stored)", () =>
    Effect.gen(function*() {
      const { open } = yield* sharedStore()
      const messages = Array.from({ length: 2000 }, (_, i) => storedMessage(i))
      yield* (yield* open).save("t", { version: 1, threadId: "t", messages, slices: {} })
      // another instance (a new process) loads the thread, adds a step and saves
      const other = yield* open
      const loaded = Option.getOrThrow(yield* other.load("t"))
      const next = { ...loaded, messages: [...loaded.messages, storedMessage(2000), storedMessage(2001)] }
      const calls = yield* stringifyCalls(other.save("t", next))
      // 2,002 messages: 31 whole chunks copied, the partial one (18 messages) and the head encoded
      assert.isBelow(calls, 64 + 10)
      for (const reader of [other, yield* open]) {
        assert.deepStrictEqual(Option.getOrThrow(yield* reader.load("t")), next)
      }
    }))

  it.effect("a history rewrite copies the whole chunks before the first changed message", () =>
    Effect.gen(function*() {
      const { open } = yield* sharedStore()
      const checkpointer = yield* open
      const messages = Array.from({ length: 2000 }, (_, i) => storedMessage(i))
      yield* checkpointer.save("t", { version: 1, threadId: "t", messages, slices: {} })
      const rewritten = [...messages.slice(0, 1500), storedMessage(-1), ...messages.slice(1501)]
      const calls = yield* stringifyCalls(
        checkpointer.save("t", { version: 1, threadId: "t", messages: rewritten, slices: {} })
      )
      // chunks 0–22 (messages 0–1471) copied; messages 1472 on encoded
      assert.isBelow(calls, 2000 - 1472 + 10)
      assert.deepStrictEqual(Option.getOrThrow(yield* (yield* open).load("t")).messages, rewritten)
    }))

  it.effect.prop(
    "a crash at any write of that save leaves the last committed thread, which every instance loads whole",
    {
      size: FastCheck.integer({ min: 0, max: 300 }),
      added: FastCheck.integer({ min: 0, max: 70 }),
      failAt: FastCheck.nat({ max: 12 }),
      replaced: FastCheck.option(FastCheck.nat(), { nil: undefined })
    },
    ({ added, failAt, replaced, size }) =>
      Effect.gen(function*() {
        let sets = 0
        let failing = false
        const { open, store } = yield* sharedStore(() => failing && sets++ === failAt)
        const messages = Array.from({ length: size }, (_, i) => storedMessage(i))
        const committed: Checkpointer.Checkpoint = { version: 1, threadId: "t", messages, slices: {} }
        yield* (yield* open).save("t", committed)
        const other = yield* open
        const loaded = Option.getOrThrow(yield* other.load("t"))
        const grown = [...loaded.messages, ...Array.from({ length: added }, (_, i) => storedMessage(size + i))]
        if (replaced !== undefined && grown.length > 0) grown[replaced % grown.length] = storedMessage(-1)
        const next: Checkpointer.Checkpoint = { ...loaded, messages: grown }
        failing = true
        const saved = yield* Effect.exit(other.save("t", next))
        failing = false
        const expected = saved._tag === "Success" ? next : committed
        for (const reader of [other, yield* open]) {
          assert.deepStrictEqual(Option.getOrThrow(yield* reader.load("t")).messages, expected.messages)
        }
        // every whole chunk the head names holds the JSON of its messages
        const head = JSON.parse(Option.getOrThrow(yield* store.get("thread:t")))
        for (let i = 0; i < Math.floor(head.log.messages / 64); i++) {
          assert.strictEqual(
            Option.getOrThrow(yield* store.get(`thread:t#log/${head.log.generation}/${i}`)),
            JSON.stringify(expected.messages.slice(i * 64, (i + 1) * 64))
          )
        }
      }),
    { fastCheck: { numRuns: 80 } }
  )
})
