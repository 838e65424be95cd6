/**
 * The demo's `read_file` reads only regular files of bounded size: a FIFO in its folder (opening one for
 * reading waits for a writer) or a link to a device (`/dev/zero` never ends) is refused at once with the tool's
 * error, naming what it is.
 */
import * as NodeContext from "@effect/platform-node/NodeContext"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { DemoToolkit, layerHandlers } from "../src/DemoTools.js"

const hasFifos = process.platform !== "win32" && fs.existsSync("/dev/zero")

const folder = Effect.acquireRelease(
  Effect.sync(() => fs.mkdtempSync(path.join(os.tmpdir(), "stepwise-demo-tools-"))),
  (made) =>
    Effect.sync(() => {
      // a writer comes and goes, so a reader the old code left waiting on the FIFO ends
      const fifo = path.join(made, "fifo.txt")
      if (fs.existsSync(fifo)) fs.closeSync(fs.openSync(fifo, fs.constants.O_RDWR | fs.constants.O_NONBLOCK))
      fs.rmSync(made, { recursive: true, force: true })
    })
)

/** What `read_file` answers for `file` in `directory`, or "blocked" when it had not answered in 5 s. */
const readFile = (directory: string, file: string) =>
  DemoToolkit.pipe(
    Effect.flatMap((toolkit) => toolkit.handle("read_file", { path: file })),
    Effect.map(({ result }) => result),
    Effect.timeoutFail({ duration: "5 seconds", onTimeout: () => "blocked" as const }),
    Effect.provide(layerHandlers(directory).pipe(Layer.provide(NodeContext.layer)))
  )

describe.skipIf(!hasFifos)("DemoTools read_file", () => {
  it.scopedLive("reads a regular file; refuses a FIFO, a link to /dev/zero and a file over 1 MiB, naming them", () =>
    Effect.gen(function*() {
      const directory = yield* folder
      fs.writeFileSync(path.join(directory, "notes.txt"), "hello")
      execFileSync("mkfifo", [path.join(directory, "fifo.txt")])
      fs.symlinkSync("/dev/zero", path.join(directory, "zero.txt"))
      fs.writeFileSync(path.join(directory, "huge.txt"), "")
      fs.truncateSync(path.join(directory, "huge.txt"), 64 * 1024 * 1024)
      assert.strictEqual(yield* readFile(directory, "notes.txt"), "hello")
      assert.deepStrictEqual(yield* readFile(directory, "fifo.txt"), {
        error: `"fifo.txt" is a FIFO, not a regular file`
      })
      assert.deepStrictEqual(yield* readFile(directory, "zero.txt"), {
        error: `"zero.txt" is a CharacterDevice, not a regular file`
      })
      assert.include(JSON.stringify(yield* readFile(directory, "huge.txt")), "over the 1048576 read_file reads")
    }))
})
