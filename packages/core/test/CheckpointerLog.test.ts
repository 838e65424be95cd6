import { FileSystem, KeyValueStore } from "@effect/platform"
import * as NodeContext from "@effect/platform-node/NodeContext"
import { assert, describe, it } from "@effect/vitest"
import { AgentState, Checkpointer } from "@stepwise-agent/core"
import { Arbitraries } from "@stepwise-agent/testing"
import { Effect, FastCheck, Layer, Option, TestClock } from "effect"
import { type ChildProcess, spawn } from "node:child_process"
import { createRequire } from "node:module"
import * as os from "node:os"
import * as path from "node:path"
import * as readline from "node:readline"
import { fileURLToPath, pathToFileURL } from "node:url"
import { thread } from "./processes/logWriterMessages.js"

const tempDirectory = Effect.flatMap(
  FileSystem.FileSystem,
  (fs) => fs.makeTempDirectoryScoped({ directory: os.tmpdir(), prefix: "stepwise-log-" })
)

/** A backend: `open` makes a checkpointer instance on the same storage each time (a fresh process, as far as it knows). */
interface Backend {
  readonly open: Effect.Effect<Checkpointer.Checkpointer.Service, unknown>
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
  { arbitrary: FastCheck.record({ _tag: FastCheck.constant("append"), count: FastCheck.integer({ min: 0, max: 70 }) }), weight: 4 },
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
