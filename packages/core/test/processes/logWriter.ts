/**
 * A writer for the crash test of `Checkpointer.layerFileSystem`: appends
 * batches of large messages to one thread in `DIRECTORY`, printing
 * `committed <messages>` after each save. Its file system writes a log
 * append in 64 KiB pieces, 20 ms apart, and prints `appending <messages>`
 * once the first piece of the save that would reach `<messages>` is on disk.
 * A save that would reach `HOLD_AT` messages or more stops there, for good,
 * so a SIGKILL sent then lands mid-append however long it takes to arrive.
 */
import * as NodeContext from "@effect/platform-node/NodeContext"
import * as FileSystem from "@effect/platform/FileSystem"
import { Checkpointer } from "@stepwise-agent/core"
import { Effect, Layer } from "effect"
import { batch, batchSize } from "./logWriterMessages.js"

const directory = process.env["DIRECTORY"]!
const piece = 64 * 1024
const holdAt = Number(process.env["HOLD_AT"] ?? Infinity)
let saving = 0

/** A file system whose files write in slow pieces (and say when the first one is written). */
const SlowFileSystem = Layer.effect(
  FileSystem.FileSystem,
  Effect.map(FileSystem.FileSystem, (fs) => ({
    ...fs,
    open: (path: string, options?: FileSystem.OpenFileOptions) =>
      Effect.map(fs.open(path, options), (file) => {
        // shares the file's methods and position
        const slow: FileSystem.File = Object.assign(Object.create(file) as FileSystem.File, {
          writeAll: (buffer: Uint8Array) =>
            Effect.gen(function*() {
              for (let at = 0; at < buffer.length; at += piece) {
                yield* file.writeAll.call(slow, buffer.subarray(at, at + piece))
                if (at === 0) {
                  yield* Effect.sync(() => console.log(`appending ${saving}`))
                  if (saving >= holdAt) yield* Effect.never
                }
                yield* Effect.sleep("20 millis")
              }
            })
        })
        return slow
      })
  }))
).pipe(Layer.provide(NodeContext.layer))

const program = Effect.gen(function*() {
  const checkpointer = yield* Checkpointer.makeFileSystem(directory)
  let messages: ReadonlyArray<unknown> = []
  for (let index = 0; index < 1000; index++) {
    messages = [...messages, ...batch(index)]
    saving = messages.length
    yield* checkpointer.save("t", { version: 1, threadId: "t", messages, slices: { batches: index + 1 } })
    console.log(`committed ${messages.length}`)
  }
  console.log(`done ${batchSize}`)
})

Effect.runPromise(program.pipe(Effect.provide(Layer.merge(NodeContext.layer, SlowFileSystem)))).catch((error) => {
  console.error(error)
  process.exit(1)
})
