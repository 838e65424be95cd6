import { Prompt } from "@effect/ai"
import { FileSystem, KeyValueStore } from "@effect/platform"
import * as NodeContext from "@effect/platform-node/NodeContext"
import { assert, describe, it } from "@effect/vitest"
import { Agent, AgentState, Checkpointer } from "@stepwise-agent/core"
import { Arbitraries, ScriptedModel } from "@stepwise-agent/testing"
import { Effect, FastCheck, Layer, Option, TestClock } from "effect"
import * as os from "node:os"
import * as path from "node:path"
import * as Child from "./processes/child.js"
import { thread } from "./processes/logWriterMessages.js"
import { Calculator, CalculatorLive } from "./utils.js"

const tempDirectory = Effect.flatMap(
  FileSystem.FileSystem,
  (fs) => fs.makeTempDirectoryScoped({ directory: os.tmpdir(), prefix: "stepwise-log-" })
)

/** A backend: `open` makes a checkpointer instance on the same storage each time (a fresh process, as far as it knows). */
interface Backend {
  readonly open: Effect.Effect<Checkpointer.Service, unknown>
}

const fileSystem = Effect.map(tempDirectory, (directory): Backend => ({
  open: Checkpointer.makeFileSystem(directory).pipe(Effect.provide(NodeContext.layer))
}))

const memoryStore = Effect.map(
  Effect.provide(KeyValueStore.KeyValueStore, KeyValueStore.layerMemory),
  (store): Backend => ({
    open: Checkpointer.makeKeyValueStore().pipe(Effect.provideService(KeyValueStore.KeyValueStore, store))
  })
)

const memory = Effect.map(Checkpointer.makeMemory, (checkpointer): Backend => ({ open: Effect.succeed(checkpointer) }))

const backends = [
  ["memory", memory],
  ["file system", fileSystem],
  ["KeyValueStore (memory)", memoryStore]
] as const

/** A change to the thread between two saves. */
type Change =
  | { readonly _tag: "append"; readonly count: number }
  | { readonly _tag: "rewrite"; readonly at: number }
  | { readonly _tag: "shrink"; readonly to: number }
  | { readonly _tag: "state"; readonly value: number; readonly pending: boolean }
  | { readonly _tag: "otherWriter" }

const change: FastCheck.Arbitrary<Change> = FastCheck.oneof(
  {
    arbitrary: FastCheck.record({ _tag: FastCheck.constant("append"), count: FastCheck.integer({ min: 0, max: 70 }) }),
    weight: 4
  },
  FastCheck.record({ _tag: FastCheck.constant("rewrite"), at: FastCheck.nat({ max: 1000 }) }),
  FastCheck.record({ _tag: FastCheck.constant("shrink"), to: FastCheck.nat({ max: 1000 }) }),
  FastCheck.record({ _tag: FastCheck.constant("state"), value: FastCheck.nat(), pending: FastCheck.boolean() }),
  FastCheck.record({ _tag: FastCheck.constant("otherWriter") })
) as FastCheck.Arbitrary<Change>

describe("Checkpointer: a thread saved again and again loads back whole", () => {
  for (const [name, makeBackend] of backends) {
    it.scoped.prop(
      `${name}: appends, rewrites of earlier messages, shrinks and another writer`,
      {
        conversation: Arbitraries.conversation({ maxTurns: 3, maxResultSize: 50 }),
        changes: FastCheck.array(change, { minLength: 1, maxLength: 8 })
      },
      ({ changes, conversation }) =>
        Effect.gen(function*() {
          const backend = yield* makeBackend
          const pool = AgentState.encodeMessages(conversation)
          const writers = [yield* backend.open, yield* backend.open]
          let writer = 0
          let messages: ReadonlyArray<unknown> = []
          let slices: Record<string, unknown> = { counter: { value: 0 } }
          let pending: Checkpointer.PendingInterrupt | undefined
          let fresh = 0
          const next = () => structuredClone(pool[fresh++ % pool.length])
          for (const step of changes) {
            switch (step._tag) {
              case "append":
                messages = [...messages, ...Array.from({ length: step.count }, next)]
                break
              case "rewrite":
                if (messages.length > 0) {
                  const at = step.at % messages.length
                  messages = [
                    ...messages.slice(0, at),
                    { role: "user", content: [{ type: "text", text: `summary ${fresh++}` }] },
                    ...messages.slice(at + 1)
                  ]
                }
                break
              case "shrink":
                messages = messages.slice(0, step.to % (messages.length + 1))
                break
              case "state":
                slices = { counter: { value: step.value } }
                pending = step.pending
                  ? { node: "beforeModel", middleware: "approval", value: { ask: step.value }, key: "k" }
                  : undefined
                break
              case "otherWriter":
                writer = 1 - writer
                break
            }
            const checkpoint: Checkpointer.Checkpoint = {
              version: 1,
              threadId: "t",
              messages,
              slices,
              ...(pending === undefined ? {} : {
                pending,
                run: { step: 1, inputTokens: 2, outputTokens: 3, totalTokens: 5 }
              })
            }
            yield* writers[writer]!.save("t", checkpoint)
            // the writer, the other instance, and a new one all read what was saved last
            for (const reader of [writers[writer]!, writers[1 - writer]!, yield* backend.open]) {
              assert.deepStrictEqual(Option.getOrThrow(yield* reader.load("t")), checkpoint)
            }
          }
          yield* writers[writer]!.delete("t")
          assert.isTrue(Option.isNone(yield* (yield* backend.open).load("t")))
        }).pipe(Effect.provide(NodeContext.layer)),
      { fastCheck: { numRuns: name === "file system" ? 25 : 60 } }
    )
  }
})

/** A file system that counts the bytes each write hands it. */
const countingFileSystem = (written: { bytes: number }) =>
  Layer.effect(
    FileSystem.FileSystem,
    Effect.map(FileSystem.FileSystem, (fs): FileSystem.FileSystem => ({
      ...fs,
      writeFile: (path, data, options) => {
        written.bytes += data.length
        return fs.writeFile(path, data, options)
      },
      writeFileString: (path, data, options) => {
        written.bytes += Buffer.byteLength(data)
        return fs.writeFileString(path, data, options)
      },
      open: (path, options) =>
        Effect.map(fs.open(path, options), (file) => {
          // shares the file's methods and position
          const counting: FileSystem.File = Object.assign(Object.create(file) as FileSystem.File, {
            write: (buffer: Uint8Array) => {
              written.bytes += buffer.length
              return file.write.call(counting, buffer)
            },
            writeAll: (buffer: Uint8Array) => {
              written.bytes += buffer.length
              return file.writeAll.call(counting, buffer)
            }
          })
          return counting
        })
    }))
  ).pipe(Layer.provide(NodeContext.layer))

/** A memory `KeyValueStore` that counts the characters each `set` hands it. */
const countingStore = (written: { bytes: number }) =>
  Effect.map(
    Effect.provide(KeyValueStore.KeyValueStore, KeyValueStore.layerMemory),
    (store) =>
      KeyValueStore.make({
        get: store.get,
        getUint8Array: store.getUint8Array,
        set: (key, value) => {
          written.bytes += typeof value === "string" ? value.length : value.length
          return store.set(key, value)
        },
        remove: store.remove,
        clear: store.clear,
        size: store.size
      })
  )

const message = (i: number) => ({ role: "user", content: [{ type: "text", text: `message ${i} ${"x".repeat(100)}` }] })

/** Bytes written by a one-message step on an `n`-message thread this checkpointer saved last. */
const stepBytes = (checkpointer: Checkpointer.Service, written: { bytes: number }, n: number) =>
  Effect.gen(function*() {
    const threadId = `thread-${n}`
    const messages = Array.from({ length: n }, (_, i) => message(i))
    yield* checkpointer.save(threadId, { version: 1, threadId, messages, slices: { step: 0 } })
    const before = written.bytes
    const next = [...messages, message(n)]
    yield* checkpointer.save(threadId, { version: 1, threadId, messages: next, slices: { step: 1 } })
    return { step: written.bytes - before, whole: Buffer.byteLength(JSON.stringify(next)) }
  })

describe("Checkpointer: a step writes only what is new", () => {
  it.scoped("file system: a one-message step writes the same bytes on a 10,000-message thread as on a 10-message one", () =>
    Effect.gen(function*() {
      const written = { bytes: 0 }
      const directory = yield* tempDirectory
      const checkpointer = yield* Checkpointer.makeFileSystem(directory).pipe(
        Effect.provide(countingFileSystem(written))
      )
      const small = yield* stepBytes(checkpointer, written, 10)
      const large = yield* stepBytes(checkpointer, written, 10_000)
      // the head (which names the thread and counts its messages and bytes) and the new message's line:
      // the same size but for the digits of the counts
      assert.isBelow(Math.abs(large.step - small.step), 16)
      assert.isBelow(large.step, 500)
      assert.isAbove(large.whole, 1_000_000)
    }).pipe(Effect.provide(NodeContext.layer)))

  it.effect("KeyValueStore: a one-message step writes at most one chunk of 64 messages and the head", () =>
    Effect.gen(function*() {
      const written = { bytes: 0 }
      const store = yield* countingStore(written)
      const checkpointer = yield* Checkpointer.makeKeyValueStore().pipe(
        Effect.provideService(KeyValueStore.KeyValueStore, store)
      )
      const small = yield* stepBytes(checkpointer, written, 10)
      const large = yield* stepBytes(checkpointer, written, 10_000)
      const messageBytes = JSON.stringify(message(10_000)).length + 1
      assert.isBelow(small.step, 12 * messageBytes + 300)
      // 10,001 messages: 156 whole chunks, and a partial one of 17, the one written
      assert.isBelow(large.step, 17 * messageBytes + 300)
      assert.isAbove(large.whole, 1_000_000)
    }))
})

/** A memory `KeyValueStore` whose `set` fails when `fails()` says so (the value is not stored). */
const failingStore = (fails: (key: string) => boolean) =>
  Effect.map(
    Effect.provide(KeyValueStore.KeyValueStore, KeyValueStore.layerMemory),
    (store) => ({
      store,
      failing: KeyValueStore.make({
        get: store.get,
        getUint8Array: store.getUint8Array,
        set: (key, value) => fails(key) ? Effect.die(`set ${key} failed`) : store.set(key, value),
        remove: store.remove,
        clear: store.clear,
        size: store.size
      })
    })
  )

describe("Checkpointer.makeKeyValueStore: the partial last chunk", () => {
  it.effect("a step encodes only its new messages, not the ones the partial chunk already held", () =>
    Effect.gen(function*() {
      const store = yield* Effect.provide(KeyValueStore.KeyValueStore, KeyValueStore.layerMemory)
      const checkpointer = yield* Checkpointer.makeKeyValueStore().pipe(
        Effect.provideService(KeyValueStore.KeyValueStore, store)
      )
      const encodings = { count: 0 }
      // a message that counts how often its JSON is written
      const counted = (i: number) => ({
        toJSON: () => {
          encodings.count++
          return message(i)
        }
      })
      let messages: ReadonlyArray<unknown> = Array.from({ length: 10 }, (_, i) => counted(i))
      yield* checkpointer.save("t", { version: 1, threadId: "t", messages, slices: {} })
      // one message a step, across the end of the first chunk (64 messages)
      for (let i = 10; i < 70; i++) {
        messages = [...messages, counted(i)]
        yield* checkpointer.save("t", { version: 1, threadId: "t", messages, slices: {} })
      }
      assert.strictEqual(encodings.count, 70)
      const loaded = Option.getOrThrow(
        yield* (yield* Checkpointer.makeKeyValueStore().pipe(
          Effect.provideService(KeyValueStore.KeyValueStore, store)
        )).load("t")
      )
      assert.deepStrictEqual(loaded.messages, Array.from({ length: 70 }, (_, i) => message(i)))
    }))

  it.effect.prop(
    "every chunk and tail a head names holds the JSON of its messages, through failed writes",
    {
      steps: FastCheck.array(
        FastCheck.record({ count: FastCheck.integer({ min: 0, max: 70 }), fail: FastCheck.nat({ max: 8 }) }),
        { minLength: 1, maxLength: 10 }
      )
    },
    ({ steps }) =>
      Effect.gen(function*() {
        let failAt = -1
        let sets = 0
        const { failing, store } = yield* failingStore(() => sets++ === failAt)
        const checkpointer = yield* Checkpointer.makeKeyValueStore().pipe(
          Effect.provideService(KeyValueStore.KeyValueStore, failing)
        )
        let messages: ReadonlyArray<unknown> = []
        let committed: ReadonlyArray<unknown> | undefined
        for (const [attempt, step] of steps.entries()) {
          // the messages of each attempt differ from those an attempt that failed wrote at the same places
          const added = Array.from({ length: step.count }, (_, i) => ({
            role: "user",
            content: [{ type: "text", text: `message ${messages.length + i} of attempt ${attempt}` }]
          }))
          messages = [...messages, ...added]
          // the save's `fail`-th write fails (one past its last write: none does)
          sets = 0
          failAt = step.fail
          const saved = yield* Effect.exit(
            checkpointer.save("t", { version: 1, threadId: "t", messages, slices: {} })
          )
          if (saved._tag === "Success") committed = messages
          else messages = committed ?? []
          const stored = yield* store.get("thread:t")
          if (committed === undefined) {
            // no save went through yet: none is committed
            assert.isTrue(Option.isNone(stored))
            continue
          }
          const head = JSON.parse(Option.getOrThrow(stored))
          const { end, generation, messages: count } = head.log
          assert.strictEqual(count, committed.length)
          const full = Math.floor(count / 64)
          for (let i = 0; i < full; i++) {
            assert.strictEqual(
              Option.getOrThrow(yield* store.get(`thread:t#log/${generation}/${i}`)),
              JSON.stringify(committed.slice(i * 64, (i + 1) * 64))
            )
          }
          if (count > full * 64) {
            assert.strictEqual(
              Option.getOrThrow(yield* store.get(`thread:t#log/${generation}/tail${end}`)),
              JSON.stringify({ start: full * 64, messages: committed.slice(full * 64) })
            )
          }
          const fresh = yield* Checkpointer.makeKeyValueStore().pipe(
            Effect.provideService(KeyValueStore.KeyValueStore, store)
          )
          assert.deepStrictEqual(Option.getOrThrow(yield* fresh.load("t")).messages, committed)
        }
      }),
    { fastCheck: { numRuns: 60 } }
  )
})

describe("Checkpointer.layerFileSystem: a torn tail", () => {
  it.scoped("bytes past the committed end of the log are never read, and the next append writes over them", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const directory = yield* tempDirectory
      const writer = yield* Checkpointer.makeFileSystem(directory)
      const first = [message(0), message(1)]
      yield* writer.save("t", { version: 1, threadId: "t", messages: first, slices: {} })
      const head = JSON.parse(yield* fs.readFileString(path.join(directory, "t.json")))
      const log = path.join(directory, `t.${head.log.generation}.log`)
      // a torn append: half a line, no newline
      const torn = `${JSON.stringify(message(2)).slice(0, 40)}`
      yield* fs.writeFileString(log, torn, { flag: "a" })
      const fresh = yield* Checkpointer.makeFileSystem(directory)
      assert.deepStrictEqual(
        Option.getOrThrow(yield* fresh.load("t")),
        { version: 1, threadId: "t", messages: first, slices: {} }
      )
      // the writer appends where the committed log ends, and cuts what was past it
      const second = [...first, message(3)]
      yield* writer.save("t", { version: 1, threadId: "t", messages: second, slices: {} })
      assert.strictEqual(
        yield* fs.readFileString(log),
        first.concat([message(3)]).map((m) => JSON.stringify(m) + "\n").join("")
      )
      assert.deepStrictEqual(
        Option.getOrThrow(yield* (yield* Checkpointer.makeFileSystem(directory)).load("t")),
        { version: 1, threadId: "t", messages: second, slices: {} }
      )
    }).pipe(Effect.provide(NodeContext.layer)))

  it.scoped("a committed log that lost bytes fails the load with CheckpointError naming what is wrong", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const directory = yield* tempDirectory
      const writer = yield* Checkpointer.makeFileSystem(directory)
      yield* writer.save("t", { version: 1, threadId: "t", messages: [message(0), message(1)], slices: {} })
      const head = JSON.parse(yield* fs.readFileString(path.join(directory, "t.json")))
      yield* fs.truncate(path.join(directory, `t.${head.log.generation}.log`), 10)
      const error = yield* Effect.flip((yield* Checkpointer.makeFileSystem(directory)).load("t"))
      assert.strictEqual(error._tag, "CheckpointError")
      assert.strictEqual(error.operation, "load")
      assert.include(error.reason, `the log "${head.log.generation}" its head names is missing or holds fewer`)
      // a line that is not JSON inside the committed part
      yield* fs.writeFileString(
        path.join(directory, `t.${head.log.generation}.log`),
        "{not json}\n".padEnd(head.log.end - 1, " ") + "\n"
      )
      const corrupt = yield* Effect.flip((yield* Checkpointer.makeFileSystem(directory)).load("t"))
      assert.include(corrupt.reason, "the log's message 1 is not valid JSON")
    }).pipe(Effect.provide(NodeContext.layer)))

  it.scoped(
    "a writer process killed mid-append: the next load returns the last committed checkpoint, and saves go on",
    () =>
      Effect.gen(function*() {
        const fs = yield* FileSystem.FileSystem
        const directory = yield* tempDirectory
        // it holds the append that reaches 256 messages after its first 64 KiB: the kill lands there on any machine
        const child = yield* startWriter(directory, 256)
        // two appends committed, the third under way (its first 64 KiB written)
        const line = yield* child.waitFor((line) => /^appending (\d+)$/.test(line) && Number(line.slice(10)) >= 256)
        yield* child.kill
        const appending = Number(line.slice(10))
        const committed = appending - 64
        assert.includeMembers(child.lines, [`committed ${committed}`])
        assert.notInclude(child.lines, `committed ${appending}`)
        // the log holds more than the head commits: the torn append
        const head = JSON.parse(yield* fs.readFileString(path.join(directory, "t.json")))
        assert.strictEqual(head.log.messages, committed)
        const logSize = (yield* fs.stat(path.join(directory, `t.${head.log.generation}.log`))).size
        assert.isAbove(Number(logSize), head.log.end)

        // the killed writer still holds the thread's lock file: the next save takes it over once it is stale
        const checkpointer = yield* Checkpointer.makeFileSystem(directory, { staleLockAfter: "1 second" })
        const loaded = Option.getOrThrow(yield* checkpointer.load("t"))
        assert.deepStrictEqual(loaded, {
          version: 1,
          threadId: "t",
          messages: thread(committed / 64),
          slices: { batches: committed / 64 }
        })
        const next = { ...loaded, messages: [...loaded.messages, message(0)], slices: { batches: -1 } }
        yield* checkpointer.save("t", next)
        assert.deepStrictEqual(
          Option.getOrThrow(yield* (yield* Checkpointer.makeFileSystem(directory)).load("t")),
          next
        )
      }).pipe(Effect.provide(NodeContext.layer)),
    60_000
  )
})

/** Runs `processes/logWriter.ts` on `directory`, holding the append that reaches `holdAt` messages (killed with the scope). */
const startWriter = (directory: string, holdAt: number) =>
  Child.start("./logWriter.ts", { DIRECTORY: directory, HOLD_AT: String(holdAt) })

describe("Checkpointer: threads stored by the previous version", () => {
  const legacy: Checkpointer.Checkpoint = {
    version: 1,
    threadId: "user:1/chat",
    messages: [message(0), message(1)],
    slices: { counter: { modelCalls: "2" } },
    pending: { node: "beforeModel", middleware: "approval", value: { question: "?" }, key: "k" },
    run: { step: 2, inputTokens: 3, outputTokens: 4, totalTokens: 7 }
  }

  it.scoped("file system: a `<thread>.json` checkpoint loads, and the next save turns it into a head and a log", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const directory = yield* tempDirectory
      const file = path.join(directory, `${encodeURIComponent(legacy.threadId)}.json`)
      // exactly what the previous version wrote
      yield* fs.writeFileString(file, JSON.stringify(legacy))
      const checkpointer = yield* Checkpointer.makeFileSystem(directory)
      const loaded = Option.getOrThrow(yield* checkpointer.load(legacy.threadId))
      assert.deepStrictEqual(loaded, legacy)
      const next = { ...loaded, messages: [...loaded.messages, message(2)] }
      yield* checkpointer.save(legacy.threadId, next)
      assert.strictEqual(JSON.parse(yield* fs.readFileString(file)).version, 2)
      assert.deepStrictEqual(
        Option.getOrThrow(yield* (yield* Checkpointer.makeFileSystem(directory)).load(legacy.threadId)),
        next
      )
    }).pipe(Effect.provide(NodeContext.layer)))

  it.effect("KeyValueStore: a checkpoint stored whole under `prefix + threadId` loads, and the next save replaces it", () =>
    Effect.gen(function*() {
      const store = yield* Effect.provide(KeyValueStore.KeyValueStore, KeyValueStore.layerMemory)
      yield* store.set(`thread:${legacy.threadId}`, JSON.stringify(legacy))
      const open = Checkpointer.makeKeyValueStore().pipe(Effect.provideService(KeyValueStore.KeyValueStore, store))
      const checkpointer = yield* open
      const loaded = Option.getOrThrow(yield* checkpointer.load(legacy.threadId))
      assert.deepStrictEqual(loaded, legacy)
      const next = { ...loaded, messages: [...loaded.messages, message(2)] }
      yield* checkpointer.save(legacy.threadId, next)
      assert.strictEqual(JSON.parse(Option.getOrThrow(yield* store.get(`thread:${legacy.threadId}`))).version, 2)
      assert.deepStrictEqual(Option.getOrThrow(yield* (yield* open).load(legacy.threadId)), next)
    }))
})

describe("Checkpointer: logs another writer replaced", () => {
  it.scoped("are kept a minute (that writer may still be appending to one), then deleted by the next save", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const directory = yield* tempDirectory
      const [first, second] = yield* Effect.all([
        Checkpointer.makeFileSystem(directory),
        Checkpointer.makeFileSystem(directory)
      ])
      const logs = Effect.map(fs.readDirectory(directory), (files) => files.filter((file) => file.endsWith(".log")))
      const messages = [message(0)]
      yield* first.save("t", { version: 1, threadId: "t", messages, slices: {} })
      const [firstLog] = yield* logs
      // the other instance cannot append to the first one's log: it writes the thread to a log of its own
      yield* second.save("t", { version: 1, threadId: "t", messages: [...messages, message(1)], slices: {} })
      assert.strictEqual((yield* logs).length, 2)
      yield* TestClock.adjust("59 seconds")
      yield* second.save("t", { version: 1, threadId: "t", messages: [...messages, message(2)], slices: {} })
      assert.include(yield* logs, firstLog)
      yield* TestClock.adjust("1 second")
      const last = { version: 1 as const, threadId: "t", messages: [...messages, message(3)], slices: {} }
      yield* second.save("t", last)
      const left = yield* logs
      assert.strictEqual(left.length, 1)
      assert.notInclude(left, firstLog)
      assert.deepStrictEqual(Option.getOrThrow(yield* first.load("t")), last)
    }).pipe(Effect.provide(NodeContext.layer)))
})

describe("Checkpointer.layerFileSystem under an agent", () => {
  it.scoped("a run on a long stored thread appends at each checkpoint: it writes its new messages, not the thread", () =>
    Effect.gen(function*() {
      const written = { bytes: 0 }
      const directory = yield* tempDirectory
      const threadId = "long"
      // a stored thread of 2,001 messages: questions and answers
      const stored = [
        ...Array.from({ length: 1000 }, (_, i) => [
          Prompt.makeMessage("user", {
            content: [Prompt.makePart("text", { text: `question ${i} ${"q".repeat(200)}` })]
          }),
          Prompt.makeMessage("assistant", { content: [Prompt.makePart("text", { text: `answer ${i}` })] })
        ]).flat(),
        Prompt.makeMessage("user", { content: [Prompt.makePart("text", { text: "last" })] })
      ]
      yield* (yield* Checkpointer.makeFileSystem(directory)).save(threadId, {
        version: 1,
        threadId,
        messages: AgentState.encodeMessages(stored),
        slices: {}
      })
      const wholeThread = Buffer.byteLength(JSON.stringify(AgentState.encodeMessages(stored)))
      const checkpointer = yield* Checkpointer.makeFileSystem(directory).pipe(
        Effect.provide(countingFileSystem(written))
      )
      const script = (n: number) => [
        ScriptedModel.toolCalls([{ name: "add", params: { a: 1, b: n }, id: `c${n}` }]),
        ScriptedModel.toolCalls([{ name: "add", params: { a: 2, b: n }, id: `d${n}` }]),
        ScriptedModel.text("done")
      ]
      const run = (n: number) =>
        Effect.flatMap(Agent.make({ toolkit: Calculator }), (agent) => agent.run(`Add ${n}`, { threadId })).pipe(
          Effect.provide(Layer.merge(ScriptedModel.layer(script(n)), CalculatorLive)),
          Effect.provideService(Checkpointer.Checkpointer, checkpointer)
        )
      // this checkpointer did not write the thread's log: its first checkpoint writes the thread whole, once
      yield* run(1)
      assert.isAbove(written.bytes, wholeThread)
      assert.isBelow(written.bytes, wholeThread + 10_000)
      // then three checkpoints a run (two tool steps, the end), each its new lines and a head: a few KB,
      // where one rewrite of the thread is ~250 KB
      written.bytes = 0
      const result = yield* run(2)
      assert.strictEqual(result._tag, "Completed")
      assert.strictEqual(result.state.messages.length, stored.length + 12)
      assert.isAbove(wholeThread, 240_000)
      assert.isBelow(written.bytes, 6_000)
      const loaded = Option.getOrThrow(yield* (yield* Checkpointer.makeFileSystem(directory)).load(threadId))
      assert.deepStrictEqual(loaded.messages, AgentState.encodeMessages(result.state.messages))
    }).pipe(Effect.provide(NodeContext.layer)))
})
