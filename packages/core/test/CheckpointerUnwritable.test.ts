/**
 * A checkpoint whose messages cannot be written as JSON — a cycle, nesting too deep for the stack, a bigint,
 * a getter or Proxy that throws — fails its save with a `CheckpointError` naming the message and why, in the
 * file-system and key-value checkpointers (before, the save died with the JSON error as a defect). What the
 * thread held before is kept, and the error of a throwing getter (which may hold anything) is not shown.
 */
import { KeyValueStore } from "@effect/platform"
import * as NodeContext from "@effect/platform-node/NodeContext"
import { assert, describe, it } from "@effect/vitest"
import { Checkpointer } from "@stepwise-agent/core"
import { Effect, Option } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"

const cyclic: Record<string, unknown> = { role: "user", content: "x" }
cyclic.self = cyclic
const deep: Record<string, unknown> = { role: "user", content: "x" }
for (let at = deep, n = 0; n < 100_000; n++) at = (at.next = {}) as Record<string, unknown>
const unwritable: ReadonlyArray<readonly [string, unknown, string]> = [
  ["a cycle", cyclic, "it holds a cycle"],
  ["nesting 100,000 deep", deep, "it is nested too deep"],
  ["a bigint", { role: "user", content: "x", n: 1n }, "it holds a bigint"],
  ["a throwing getter", {
    role: "user",
    get content(): string {
      throw new Error("sk-secret-in-the-getter")
    }
  }, "reading it threw"],
  [
    "a Proxy that throws",
    new Proxy({}, {
      get: () => {
        throw new Error("sk-secret-in-the-proxy")
      }
    }),
    "reading it threw"
  ]
]

const stores: ReadonlyArray<readonly [string, Effect.Effect<Checkpointer.Service>]> = [
  [
    "file system",
    Effect.suspend(() => Checkpointer.makeFileSystem(fs.mkdtempSync(path.join(os.tmpdir(), "stepwise-unwritable-"))))
      .pipe(Effect.orDie, Effect.provide(NodeContext.layer))
  ],
  ["key-value store", Effect.provide(Checkpointer.makeKeyValueStore(), KeyValueStore.layerMemory)]
]

const checkpoint = (messages: ReadonlyArray<unknown>): Checkpointer.Checkpoint => ({
  version: 1,
  threadId: "t",
  messages,
  slices: {}
})

describe("Checkpointer: messages JSON cannot write", () => {
  for (const [store, make] of stores) {
    for (const [name, message, why] of unwritable) {
      it.effect(`${store}: ${name} fails the save with CheckpointError naming it; the thread is kept`, () =>
        Effect.gen(function*() {
          const checkpointer = yield* make
          const first = [{ role: "user", content: "kept" }]
          yield* checkpointer.save("t", checkpoint(first))
          // appended to the log (the same instance, the thread extended) and written whole (a new instance's save)
          for (const messages of [[...first, message], [message]]) {
            const failed = yield* Effect.flip(checkpointer.save("t", checkpoint(messages)))
            assert.strictEqual(failed._tag, "CheckpointError")
            assert.include(failed.message, `message ${messages.length} of the thread cannot be written as JSON: ${why}`)
            assert.notInclude(failed.message, "sk-secret")
            assert.deepStrictEqual(
              Option.map(yield* checkpointer.load("t"), (loaded) => loaded.messages),
              Option.some(first)
            )
          }
        }))
    }
  }
})

describe("Checkpointer: state slices JSON cannot write", () => {
  for (const [name, value, why] of unwritable) {
    it.effect(`${name} in a slice fails the save and toJson with CheckpointError saying why, never its error`, () =>
      Effect.gen(function*() {
        const saving: Checkpointer.Checkpoint = { ...checkpoint([]), slices: { state: value } }
        for (const [, make] of stores) {
          const checkpointer = yield* make
          const failed = yield* Effect.flip(checkpointer.save("t", saving))
          assert.include(failed.message, `the checkpoint cannot be written as JSON: ${why}`)
          assert.notInclude(failed.message, "sk-secret")
        }
        const failed = yield* Effect.flip(Checkpointer.toJson("t", saving))
        assert.include(failed.message, `the checkpoint cannot be written as JSON: ${why}`)
        assert.notInclude(failed.message, "sk-secret")
      }))
  }
})
