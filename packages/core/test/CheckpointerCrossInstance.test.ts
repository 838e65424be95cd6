/**
 * A conditional save and a delete of one thread are atomic with respect to
 * each other across checkpointer instances on one store: two file-system
 * checkpointers on one directory (in one process or in two), two
 * KeyValueStore checkpointers on one `KeyValueStore`. A delete never lands
 * between a save's check and its head write: the deleted thread is neither
 * written back nor left as a head whose log is gone.
 */
import { FileSystem, KeyValueStore } from "@effect/platform"
import * as NodeContext from "@effect/platform-node/NodeContext"
import { assert, describe, it } from "@effect/vitest"
import { AgentError, Checkpointer } from "@stepwise-agent/core"
import { Deferred, Effect, Exit, FastCheck, Fiber, Layer, Option } from "effect"
import * as path from "node:path"
import * as Child from "./processes/child.js"
import * as LockScenarios from "./support/lockScenarios.js"

const checkpoint = (incarnation: string, messages: number): Checkpointer.Checkpoint => ({
  version: 1,
  threadId: "t",
  messages: Array.from({ length: messages }, (_, n) => ({ role: "user", content: `message ${n}` })),
  slices: {},
  incarnation
})

const tempDirectory = LockScenarios.tempDirectory("stepwise-cross-")

/**
 * A pause point: once armed, the first operation that passes it signals `paused` and waits for `resume`.
 */
const makeGate = Effect.gen(function*() {
  const paused = yield* Deferred.make<void>()
  const resume = yield* Deferred.make<void>()
  let armed = false
  return {
    paused,
    resume,
    arm: Effect.sync(() => void (armed = true)),
    pass: Effect.suspend(() => {
      if (!armed) return Effect.void
      armed = false
      return Effect.zipRight(Deferred.succeed(paused, undefined), Deferred.await(resume))
    })
  }
})

type Gate = Effect.Effect.Success<typeof makeGate>

/** The node file system, pausing at `gate` before a rename onto `target` (the commit of a save's head). */
const pausingBeforeRename = (gate: Gate, target: string) =>
  Layer.effect(
    FileSystem.FileSystem,
    Effect.map(FileSystem.FileSystem, (fs) => ({
      ...fs,
      rename: (from: string, to: string) =>
        to === target ? Effect.zipRight(gate.pass, fs.rename(from, to)) : fs.rename(from, to)
    }))
  ).pipe(Layer.provide(NodeContext.layer), (layer) => Layer.merge(NodeContext.layer, layer))

/** The node file system, pausing at `gate` after removing `target` (a delete that removed the head, not the logs). */
const pausingAfterRemove = (gate: Gate, target: string) =>
  Layer.effect(
    FileSystem.FileSystem,
    Effect.map(FileSystem.FileSystem, (fs) => ({
      ...fs,
      remove: (file: string, options?: FileSystem.RemoveOptions) =>
        file === target ? Effect.zipRight(fs.remove(file, options), gate.pass) : fs.remove(file, options)
    }))
  ).pipe(Layer.provide(NodeContext.layer), (layer) => Layer.merge(NodeContext.layer, layer))

const onDisk = (directory: string) => Checkpointer.makeFileSystem(directory).pipe(Effect.provide(NodeContext.layer))

/** Waits for `fiber` a while (it may be waiting for a lock: then it goes on). */
const settle = (fiber: Fiber.Fiber<unknown, unknown>) => Effect.ignore(Effect.timeout(Fiber.await(fiber), "300 millis"))

/**
 * The thread stays deleted for every instance: loads return none, a save expecting the deleted incarnation fails
 * with `ThreadDeleted` and writes nothing, and a new thread of that id starts empty and loads back.
 */
const assertStaysDeleted = (instances: ReadonlyArray<Checkpointer.Service>) =>
  Effect.gen(function*() {
    for (const instance of instances) assert.isTrue(Option.isNone(yield* instance.load("t")))
    const again = yield* Effect.flip(instances[0]!.save("t", checkpoint("i1", 3), { expected: { incarnation: "i1" } }))
    assert.instanceOf(again, AgentError.CheckpointError)
    assert.strictEqual(again.conflict, "ThreadDeleted")
    for (const instance of instances) assert.isTrue(Option.isNone(yield* instance.load("t")))
    yield* instances[1]!.save("t", checkpoint("i2", 1), { expected: "absent" })
    for (const instance of instances) {
      assert.deepStrictEqual(yield* instance.load("t"), Option.some(checkpoint("i2", 1)))
    }
  })

describe("Checkpointer.makeFileSystem: two instances on one directory, in one process", () => {
  for (
    const [variant, sameWriter] of [
      ["the save appends to the log it wrote", true],
      ["the save writes the thread whole to a new log (another instance wrote it)", false]
    ] as const
  ) {
    it.scopedLive(
      `a delete waits for a save held between its check and its head write: ${variant}`,
      () =>
        Effect.gen(function*() {
          const directory = yield* tempDirectory
          const gate = yield* makeGate
          const saver = yield* Checkpointer.makeFileSystem(directory).pipe(
            Effect.provide(pausingBeforeRename(gate, path.join(directory, "t.json")))
          )
          const deleter = yield* onDisk(directory)
          yield* (sameWriter ? saver : deleter).save("t", checkpoint("i1", 1))
          yield* gate.arm
          const save = yield* Effect.fork(saver.save("t", checkpoint("i1", 2), { expected: { incarnation: "i1" } }))
          yield* Deferred.await(gate.paused)
          const deleting = yield* Effect.fork(deleter.delete("t"))
          yield* settle(deleting)
          yield* Deferred.succeed(gate.resume, undefined)
          assert.isTrue(Exit.isSuccess(yield* Fiber.await(save)))
          yield* Fiber.join(deleting)
          yield* assertStaysDeleted([saver, deleter, yield* onDisk(directory)])
        }),
      30_000
    )
  }

  it.scopedLive(
    "a new thread saved while a delete is under way keeps its log (the delete finishes first)",
    () =>
      Effect.gen(function*() {
        const directory = yield* tempDirectory
        const gate = yield* makeGate
        const deleter = yield* Checkpointer.makeFileSystem(directory).pipe(
          Effect.provide(pausingAfterRemove(gate, path.join(directory, "t.json")))
        )
        const saver = yield* onDisk(directory)
        yield* saver.save("t", checkpoint("i1", 2))
        yield* gate.arm
        const deleting = yield* Effect.fork(deleter.delete("t"))
        yield* Deferred.await(gate.paused)
        const save = yield* Effect.fork(saver.save("t", checkpoint("i2", 1), { expected: "absent" }))
        yield* settle(save)
        yield* Deferred.succeed(gate.resume, undefined)
        yield* Fiber.join(deleting)
        yield* Fiber.join(save)
        for (const instance of [saver, deleter, yield* onDisk(directory)]) {
          assert.deepStrictEqual(yield* instance.load("t"), Option.some(checkpoint("i2", 1)))
        }
      }),
    30_000
  )
})

describe("Checkpointer.makeFileSystem: a second process deletes the thread", () => {
  it.scopedLive(
    "its delete waits for this process's save held between its check and its head write; the thread stays deleted",
    () =>
      Effect.gen(function*() {
        const directory = yield* tempDirectory
        const gate = yield* makeGate
        const saver = yield* Checkpointer.makeFileSystem(directory).pipe(
          Effect.provide(pausingBeforeRename(gate, path.join(directory, "t.json")))
        )
        yield* saver.save("t", checkpoint("i1", 1))
        yield* gate.arm
        const save = yield* Effect.fork(saver.save("t", checkpoint("i1", 2), { expected: { incarnation: "i1" } }))
        yield* Deferred.await(gate.paused)
        const child = yield* Child.start("./threadDeleter.ts", { DIRECTORY: directory, THREAD: "t" })
        yield* child.waitFor((line) => line === "deleting")
        // (a delete that does not wait is done well within this)
        yield* Effect.ignore(Effect.timeout(child.waitFor((line) => line === "deleted"), "1 second"))
        yield* Deferred.succeed(gate.resume, undefined)
        assert.isTrue(Exit.isSuccess(yield* Fiber.await(save)))
        yield* child.waitFor((line) => line === "deleted")
        yield* assertStaysDeleted([saver, yield* onDisk(directory)])
      }),
    60_000
  )
})

describe("Checkpointer.makeKeyValueStore: two instances on one KeyValueStore", () => {
  it.live("a delete waits for a save held between its check and its head write; the thread stays deleted", () =>
    Effect.gen(function*() {
      const memory = yield* Effect.provide(KeyValueStore.KeyValueStore, KeyValueStore.layerMemory)
      const gate = yield* makeGate
      // one store object, as a layer gives every instance built on it
      const store = KeyValueStore.make({
        get: memory.get,
        getUint8Array: memory.getUint8Array,
        set: (key, value) =>
          key === "thread:t" ? Effect.zipRight(gate.pass, memory.set(key, value)) : memory.set(key, value),
        remove: memory.remove,
        clear: memory.clear,
        size: memory.size
      })
      const open = Checkpointer.makeKeyValueStore().pipe(Effect.provideService(KeyValueStore.KeyValueStore, store))
      const saver = yield* open
      const deleter = yield* open
      yield* saver.save("t", checkpoint("i1", 1))
      yield* gate.arm
      const save = yield* Effect.fork(saver.save("t", checkpoint("i1", 2), { expected: { incarnation: "i1" } }))
      yield* Deferred.await(gate.paused)
      const deleting = yield* Effect.fork(deleter.delete("t"))
      yield* settle(deleting)
      yield* Deferred.succeed(gate.resume, undefined)
      assert.isTrue(Exit.isSuccess(yield* Fiber.await(save)))
      yield* Fiber.join(deleting)
      yield* assertStaysDeleted([saver, deleter, yield* open])
    }))
})

describe("Checkpointer.makeFileSystem: the thread's lock file", () => {
  it.scopedLive(
    "a lock left by a crashed holder (an mtime older than the stale limit) is taken over, then removed",
    () =>
      Effect.gen(function*() {
        const fs = yield* FileSystem.FileSystem
        const directory = yield* tempDirectory
        const lock = path.join(directory, "t.lock")
        yield* fs.writeFileString(lock, "")
        const old = new Date(Date.now() - 60_000)
        yield* fs.utimes(lock, old, old)
        const checkpointer = yield* onDisk(directory)
        const started = Date.now()
        yield* checkpointer.save("t", checkpoint("i1", 1), { expected: "absent" })
        assert.isBelow(Date.now() - started, 5_000)
        assert.isFalse(yield* fs.exists(lock))
        assert.deepStrictEqual(yield* checkpointer.load("t"), Option.some(checkpoint("i1", 1)))
        assert.deepStrictEqual((yield* fs.readDirectory(directory)).filter((file) => !/\.(json|log)$/.test(file)), [])
      }).pipe(Effect.provide(NodeContext.layer)),
    30_000
  )

  it.scopedLive(
    "a lock another process holds makes a save wait, interruptibly; the waiter leaves the lock alone",
    () =>
      Effect.gen(function*() {
        const fs = yield* FileSystem.FileSystem
        const directory = yield* tempDirectory
        const lock = path.join(directory, "t.lock")
        yield* fs.writeFileString(lock, "")
        const checkpointer = yield* onDisk(directory)
        const save = yield* Effect.fork(checkpointer.save("t", checkpoint("i1", 1)))
        yield* settle(save)
        assert.isTrue(Option.isNone(yield* Fiber.poll(save)))
        yield* Fiber.interrupt(save)
        assert.isTrue(yield* fs.exists(lock))
        assert.isTrue(Option.isNone(yield* checkpointer.load("t")))
        // the holder lets go: the next save goes through
        yield* fs.remove(lock)
        yield* checkpointer.save("t", checkpoint("i1", 1))
        assert.deepStrictEqual(yield* checkpointer.load("t"), Option.some(checkpoint("i1", 1)))
      }).pipe(Effect.provide(NodeContext.layer)),
    30_000
  )

  it.scopedLive(
    "odd thread ids: listing shows no lock, and deleting every thread leaves no file",
    () =>
      Effect.gen(function*() {
        const fs = yield* FileSystem.FileSystem
        const directory = yield* tempDirectory
        const ids = ["t", "t.lock", "t.lock.break", "a/b", "..", "%", "ü", "", "x.json"]
        const checkpointer = yield* onDisk(directory)
        // a stray lock of a thread that is not stored
        yield* fs.writeFileString(path.join(directory, "ghost.lock"), "")
        yield* Effect.forEach(ids, (id) => checkpointer.save(id, { ...checkpoint("i1", 1), threadId: id }))
        assert.deepStrictEqual((yield* checkpointer.list!()).threadIds, [...ids].sort())
        yield* Effect.forEach(ids, (id) => checkpointer.delete(id))
        assert.deepStrictEqual((yield* checkpointer.list!()).threadIds, [])
        assert.deepStrictEqual(yield* fs.readDirectory(directory), ["ghost.lock"])
        // an id too long for a file name is saved under a name derived from it (see CheckpointerLongIds.test.ts)
        const long = "x".repeat(300)
        yield* checkpointer.save(long, { ...checkpoint("i1", 1), threadId: long })
        assert.deepStrictEqual((yield* checkpointer.list!()).threadIds, [long])
        yield* checkpointer.delete(long)
        assert.deepStrictEqual(yield* fs.readDirectory(directory), ["ghost.lock"])
      }).pipe(Effect.provide(NodeContext.layer)),
    30_000
  )

  it.scopedLive("several takers of one stale lock: exactly one holds it at a time", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const directory = yield* tempDirectory
      const file = path.join(directory, "t.lock")
      yield* fs.writeFileString(file, "")
      const old = new Date(Date.now() - 60_000)
      yield* fs.utimes(file, old, old)
      // each taker as another process would be: a lock of its own on the same file (the stale lock is a minute
      // old: the default stale limit, 10 s, sees it stale at once)
      assert.strictEqual(yield* LockScenarios.mostHoldersAtOnce(file, 10_000), 1)
      assert.isFalse(yield* fs.exists(file))
    }).pipe(Effect.provide(NodeContext.layer)), 30_000)
})

describe("the lock file of a holder that holds it longer than the stale limit", () => {
  it.scopedLive("is kept fresh: a rival waits until it is released, then takes it", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const directory = yield* tempDirectory
      const file = path.join(directory, "t.lock")
      assert.deepStrictEqual(yield* LockScenarios.holderThenRival(file, fs, "2500 millis"), ["holder done", "rival in"])
      assert.isFalse(yield* fs.exists(file))
    }).pipe(Effect.provide(NodeContext.layer)), 30_000)
})

describe("the lock file of a holder that stalled past the stale limit", () => {
  it.scopedLive(
    "is taken over, and the stalled holder's release leaves its successor's lock alone",
    () =>
      Effect.gen(function*() {
        const fs = yield* FileSystem.FileSystem
        const directory = yield* tempDirectory
        const file = path.join(directory, "t.lock")
        assert.isTrue(yield* LockScenarios.stalledThenSuccessor(file), "the successor's lock is left alone")
        assert.isFalse(yield* fs.exists(file))
      }).pipe(Effect.provide(NodeContext.layer)),
    30_000
  )
})

/** An operation of the property test, by instance 0 or 1, started after `delay` turns. */
interface Operation {
  readonly instance: 0 | 1
  readonly kind: "save" | "create" | "delete" | "load"
  readonly delay: number
}

const OperationArb: FastCheck.Arbitrary<Operation> = FastCheck.record({
  instance: FastCheck.constantFrom(0 as const, 1 as const),
  kind: FastCheck.constantFrom("save" as const, "create" as const, "delete" as const, "load" as const),
  delay: FastCheck.nat({ max: 3 })
})

/**
 * What operation `index` saves: "save" continues the thread the runs loaded (incarnation i1, conditional on it);
 * "create" starts a new thread (a new incarnation, conditional on no thread).
 */
const saveOf = (operation: Operation, index: number) =>
  operation.kind === "save"
    ? { checkpoint: checkpoint("i1", index + 2), options: { expected: { incarnation: "i1" } } as const }
    : { checkpoint: checkpoint(`n${index}`, 1), options: { expected: "absent" } as const }

type Outcome = "ok" | "ThreadDeleted" | "Superseded"

/** The state a serial order of `operations` ends in, or undefined if it would not give `outcomes`. */
const serially = (
  operations: ReadonlyArray<readonly [Operation, number]>,
  outcomes: ReadonlyArray<Outcome>
): Option.Option<Checkpointer.Checkpoint> | undefined => {
  let state = Option.some(checkpoint("i1", 1))
  for (const [operation, index] of operations) {
    if (operation.kind === "delete") {
      state = Option.none()
      continue
    }
    const { checkpoint: saved, options } = saveOf(operation, index)
    const check = Effect.runSync(
      Effect.either(Checkpointer.checkExpected("t", Checkpointer.deferred(saved), state, options))
    )
    const outcome: Outcome = check._tag === "Right" ? "ok" : check.left.conflict ?? "ok"
    if (outcome !== outcomes[index]) return undefined
    if (outcome === "ok") state = Option.some(saved)
  }
  return state
}

const permutations = <A>(items: ReadonlyArray<A>): ReadonlyArray<ReadonlyArray<A>> =>
  items.length <= 1
    ? [items]
    : items.flatMap((item, i) =>
      permutations([...items.slice(0, i), ...items.slice(i + 1)]).map((rest) => [item, ...rest])
    )

/**
 * Runs `operations` at once on two instances (`open(0)`, `open(1)`) after thread "t" was saved (incarnation i1):
 * every operation succeeds or fails with a save conflict, every load (then, and by every instance after) succeeds,
 * and some serial order of the operations gives the same outcomes and the state the store ends in.
 */
const checkInterleaving = (
  operations: ReadonlyArray<Operation>,
  open: (instance: 0 | 1 | 2) => Effect.Effect<Checkpointer.Service, unknown>
) =>
  Effect.gen(function*() {
    const instances = [yield* open(0), yield* open(1)] as const
    yield* instances[0].save("t", checkpoint("i1", 1))
    const outcomes = yield* Effect.forEach(operations, (operation, index) => {
      const instance = instances[operation.instance]
      const run: Effect.Effect<Outcome, AgentError.CheckpointError> = operation.kind === "delete"
        ? Effect.as(instance.delete("t"), "ok")
        : operation.kind === "load"
        ? Effect.as(instance.load("t"), "ok")
        : instance.save("t", saveOf(operation, index).checkpoint, saveOf(operation, index).options).pipe(
          Effect.as<Outcome>("ok"),
          Effect.catchIf((error) => error.conflict !== undefined, (error) => Effect.succeed(error.conflict!))
        )
      return Effect.zipRight(Effect.repeatN(Effect.yieldNow(), operation.delay), run)
    }, { concurrency: "unbounded" })
    const final = yield* (yield* open(2)).load("t")
    for (const instance of instances) assert.deepStrictEqual(yield* instance.load("t"), final)
    const writes = operations.flatMap((operation, index) =>
      operation.kind === "load" ? [] : [[operation, index] as const]
    )
    const explained = permutations(writes).some((order) => {
      const state = serially(order, outcomes)
      return state !== undefined && Option.getEquivalence((a: Checkpointer.Checkpoint, b: Checkpointer.Checkpoint) =>
        JSON.stringify(a) === JSON.stringify(b)
      )(state, final)
    })
    assert.isTrue(explained, `no serial order explains ${JSON.stringify({ outcomes, final })}`)
  })

/** Yields `turns[k]` times before the k-th call (round robin), so the instances' store calls interleave. */
const turnTaker = (turns: ReadonlyArray<number>) => {
  let calls = 0
  return <A, E, R>(effect: Effect.Effect<A, E, R>) =>
    Effect.suspend(() => Effect.zipRight(Effect.repeatN(Effect.yieldNow(), turns[calls++ % turns.length]!), effect))
}

const interleavings = {
  operations: FastCheck.array(OperationArb, { minLength: 2, maxLength: 5 }),
  turns: FastCheck.array(FastCheck.nat({ max: 4 }), { minLength: 1, maxLength: 12 })
}

describe("Checkpointer: saves, deletes and saves again on two instances, interleaved", () => {
  it.live.prop(
    "KeyValueStore: the store ends in a state a serial order explains, and every load succeeds",
    interleavings,
    ({ operations, turns }) =>
      Effect.gen(function*() {
        const memory = yield* Effect.provide(KeyValueStore.KeyValueStore, KeyValueStore.layerMemory)
        const turn = turnTaker(turns)
        const store = KeyValueStore.make({
          get: (key) => turn(memory.get(key)),
          getUint8Array: (key) => turn(memory.getUint8Array(key)),
          set: (key, value) => turn(memory.set(key, value)),
          remove: (key) => turn(memory.remove(key)),
          clear: memory.clear,
          size: memory.size
        })
        yield* checkInterleaving(
          operations,
          () => Checkpointer.makeKeyValueStore().pipe(Effect.provideService(KeyValueStore.KeyValueStore, store))
        )
      }),
    { timeout: 120_000, fastCheck: { numRuns: 60 } }
  )

  it.live.prop(
    "file system, two directories that are one (as two processes see it): the same",
    interleavings,
    ({ operations, turns }) =>
      Effect.scoped(Effect.gen(function*() {
        const fs = yield* FileSystem.FileSystem
        const directory = yield* tempDirectory
        // another path to the same directory: its instance shares no in-process lock with the first
        const other = `${directory}-link`
        yield* fs.symlink(directory, other)
        yield* Effect.addFinalizer(() => Effect.ignore(fs.remove(other)))
        const turn = turnTaker(turns)
        const slow = Layer.effect(
          FileSystem.FileSystem,
          Effect.map(FileSystem.FileSystem, (fs) => ({
            ...fs,
            readFileString: (file: string) => turn(fs.readFileString(file)),
            writeFileString: (file: string, text: string, options?: FileSystem.WriteFileStringOptions) =>
              turn(fs.writeFileString(file, text, options)),
            writeFile: (file: string, data: Uint8Array, options?: FileSystem.WriteFileOptions) =>
              turn(fs.writeFile(file, data, options)),
            rename: (from: string, to: string) => turn(fs.rename(from, to)),
            remove: (file: string, options?: FileSystem.RemoveOptions) => turn(fs.remove(file, options)),
            readDirectory: (file: string, options?: FileSystem.ReadDirectoryOptions) =>
              turn(fs.readDirectory(file, options))
          }))
        ).pipe(Layer.provide(NodeContext.layer))
        yield* checkInterleaving(
          operations,
          (instance) =>
            Checkpointer.makeFileSystem(instance === 1 ? other : directory).pipe(
              Effect.provide(Layer.merge(NodeContext.layer, slow))
            )
        )
      })).pipe(Effect.provide(NodeContext.layer)),
    { timeout: 120_000, fastCheck: { numRuns: 25 } }
  )
})
