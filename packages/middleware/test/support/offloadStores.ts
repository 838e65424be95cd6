/**
 * The offload stores the lifetime tests run on (memory, a `KeyValueStore` in
 * memory and on a directory, the workspace in memory and on a directory),
 * each with a way to see every text it holds, and the checkpointers two
 * processes sharing one thread would have.
 */
import { FileSystem, KeyValueStore, Path } from "@effect/platform"
import { NodeContext } from "@effect/platform-node"
import { assert } from "@effect/vitest"
import { Checkpointer } from "@stepwise-agent/core"
import { Effect, Layer, Option } from "effect"
import * as Offload from "../../src/Offload.js"
import * as Workspace from "../../src/Workspace.js"

/** A store with a way to see every text it holds (raw, as stored: a JSON string for some). */
export interface Inspected {
  readonly layer: Layer.Layer<Offload.OffloadStore>
  readonly contents: Effect.Effect<ReadonlyArray<string>>
}

/** The files under `directory`, recursively: their contents. */
const filesUnder = (directory: string) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const path = yield* Path.Path
    const names = yield* fs.readDirectory(directory, { recursive: true })
    const out: Array<string> = []
    for (const name of names) {
      const file = path.join(directory, name)
      if ((yield* fs.stat(file)).type === "File") out.push(yield* fs.readFileString(file))
    }
    return out
  }).pipe(Effect.orDie, Effect.provide(NodeContext.layer))

/** `store` with the references put in it kept aside, so its contents can be asked for by reference. */
export const tracked = (store: Offload.OffloadStore.Service, refs: Set<string>): Offload.OffloadStore.Service => ({
  ...store,
  put: (ref, content) => Effect.zipRight(Effect.sync(() => void refs.add(ref)), store.put(ref, content))
})

/** Each store, by name, made in a fresh `directory` (the stores on disk use it). */
export const stores: ReadonlyArray<readonly [string, (directory: string) => Effect.Effect<Inspected>]> = [
  ["memory", () =>
    Effect.gen(function*() {
      const store = yield* Offload.makeMemory
      const refs = new Set<string>()
      return {
        layer: Layer.succeed(Offload.OffloadStore, tracked(store, refs)),
        contents: Effect.map(
          Effect.forEach(refs, (ref) => Effect.option(store.get(ref))),
          (found) => found.flatMap(Option.toArray)
        )
      }
    })],
  ["a KeyValueStore in memory", () =>
    Effect.gen(function*() {
      const kv = yield* Effect.provide(KeyValueStore.KeyValueStore, KeyValueStore.layerMemory)
      const store = yield* Effect.provide(
        Offload.OffloadStore,
        Offload.layerKeyValueStore().pipe(Layer.provide(Layer.succeed(KeyValueStore.KeyValueStore, kv)))
      )
      const refs = new Set<string>()
      return {
        layer: Layer.succeed(Offload.OffloadStore, tracked(store, refs)),
        contents: Effect.gen(function*() {
          const found = (yield* Effect.forEach(refs, (ref) => kv.get(`offload/${ref}`))).flatMap(Option.toArray)
          // nothing else is kept under another key
          assert.strictEqual(yield* kv.size, found.length)
          return found
        }).pipe(Effect.orDie)
      }
    })],
  ["a KeyValueStore on a directory", (directory) =>
    Effect.succeed({
      layer: Offload.layerKeyValueStore().pipe(
        Layer.provide(KeyValueStore.layerFileSystem(directory)),
        Layer.provide(NodeContext.layer),
        Layer.orDie
      ),
      contents: filesUnder(directory)
    })],
  ["the workspace in memory", () =>
    Effect.gen(function*() {
      const workspace = yield* Workspace.makeMemory()
      return {
        layer: Offload.layerWorkspace().pipe(Layer.provide(Layer.succeed(Workspace.Workspace, workspace))),
        contents: Effect.orDie(
          Effect.flatMap(workspace.glob("**"), (files) => Effect.forEach(files, (file) => workspace.read(file)))
        )
      }
    })],
  ["the workspace on a directory", (directory) =>
    Effect.succeed({
      layer: Offload.layerWorkspace().pipe(Layer.provide(Workspace.layerDirectory({ root: directory })), Layer.orDie),
      contents: filesUnder(directory)
    })]
]

/** The memory store (the first of {@link stores}). */
export const memory = stores[0]![1]

/** Runs `body` with the store `makeStore` makes (in a temporary directory), given what it holds. */
export const withStore = <A, E, R>(
  makeStore: (directory: string) => Effect.Effect<Inspected>,
  body: (contents: Effect.Effect<ReadonlyArray<string>>) => Effect.Effect<A, E, R>
) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const directory = yield* fs.makeTempDirectoryScoped()
    const { contents, layer } = yield* makeStore(directory)
    return yield* Effect.provide(body(contents), layer)
  }).pipe(Effect.scoped, Effect.provide(NodeContext.layer))

/** Two checkpointers on one memory store, as two processes sharing a thread have (one agent each). */
export const twoProcesses = Effect.map(Checkpointer.makeMemory, (store) => [store, store] as const)
