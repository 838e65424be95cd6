import { FileSystem } from "@effect/platform"
import { NodeContext } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Either } from "effect"
import { execFileSync, spawn } from "node:child_process"
import * as NodeFs from "node:fs"
import * as Net from "node:net"
import * as Workspace from "../src/Workspace.js"

const tagOf = <A>(effect: Effect.Effect<A, Workspace.WorkspaceError>) =>
  Effect.map(Effect.flip(effect), (error) => error._tag)

/**
 * A root holding a file, a link that stays inside, and every way out: links
 * to a directory and a file outside, a hard link to a file outside, a FIFO
 * and a socket.
 */
const setup = Effect.gen(function*() {
  const fs = yield* FileSystem.FileSystem
  const root = yield* fs.makeTempDirectoryScoped()
  const outside = yield* fs.makeTempDirectoryScoped()
  yield* fs.writeFileString(`${outside}/secret.txt`, "secret")
  yield* fs.makeDirectory(`${root}/docs`)
  yield* fs.writeFileString(`${root}/docs/guide.md`, "guide\nneedle")
  yield* fs.symlink(outside, `${root}/etc`)
  yield* fs.symlink(`${outside}/secret.txt`, `${root}/linkfile`)
  yield* fs.symlink(`${root}/docs/guide.md`, `${root}/inner-link`)
  yield* fs.symlink(`${root}/docs`, `${root}/inner-dir`)
  NodeFs.linkSync(`${outside}/secret.txt`, `${root}/hard`)
  execFileSync("mkfifo", [`${root}/fifo`])
  yield* fs.symlink(`${root}/fifo`, `${root}/fifo-link`)
  yield* fs.symlink("/dev/null", `${root}/null`)
  const server = Net.createServer()
  yield* Effect.acquireRelease(
    Effect.async<void>((resume) => {
      server.listen(`${root}/socket`, () => resume(Effect.void))
    }),
    () => Effect.async<void>((resume) => void server.close(() => resume(Effect.void)))
  )
  const workspace = yield* Workspace.makeDirectory({ root })
  return { fs, root, outside, workspace }
})

describe("Workspace on a directory: the jail", () => {
  it.scoped("ls, glob and grep list only what read accepts, and follow no link out of the root", () =>
    Effect.gen(function*() {
      const { workspace } = yield* setup
      assert.deepStrictEqual((yield* workspace.ls("/")).map((e) => `${e.path}${e.isDirectory ? "/" : ""}`), [
        "/docs/",
        "/inner-dir/",
        "/inner-link"
      ])
      // a linked directory is listed but not walked (in or out of the root)
      assert.deepStrictEqual(yield* workspace.glob("**"), ["/docs/guide.md", "/inner-link"])
      assert.deepStrictEqual(yield* workspace.glob("**/secret.txt"), [])
      assert.deepStrictEqual(yield* workspace.grep("secret"), [])
      assert.deepStrictEqual((yield* workspace.grep("needle")).map((m) => m.path), ["/docs/guide.md", "/inner-link"])
      // asked for directly, a link out of the root is refused as read refuses it
      assert.strictEqual(yield* tagOf(workspace.glob("**", "/etc")), "PathOutsideRoot")
      assert.strictEqual(yield* tagOf(workspace.grep("secret", { path: "/etc" })), "PathOutsideRoot")
      assert.strictEqual(yield* tagOf(workspace.ls("/etc")), "PathOutsideRoot")
      assert.strictEqual(yield* tagOf(workspace.ls("/linkfile")), "PathOutsideRoot")
      // a link inside the root works
      assert.deepStrictEqual((yield* workspace.ls("/inner-dir")).map((e) => e.path), ["/inner-dir/guide.md"])
      assert.strictEqual(yield* workspace.read("/inner-dir/guide.md"), "guide\nneedle")
    }).pipe(Effect.provide(NodeContext.layer)))

  it.scoped("a hard link to a file outside is neither read nor written nor edited", () =>
    Effect.gen(function*() {
      const { fs, outside, workspace } = yield* setup
      const refusal = yield* Effect.flip(workspace.read("/hard"))
      assert.isTrue(refusal._tag === "UnsupportedFile" && refusal.kind === "hard link")
      assert.strictEqual(yield* tagOf(workspace.write("/hard", "overwritten")), "UnsupportedFile")
      assert.strictEqual(yield* tagOf(workspace.edit("/hard", "secret", "x", false)), "UnsupportedFile")
      assert.strictEqual(yield* tagOf(workspace.ls("/hard")), "UnsupportedFile")
      assert.strictEqual(yield* fs.readFileString(`${outside}/secret.txt`), "secret")
    }).pipe(Effect.provide(NodeContext.layer)))

  it.scoped("a FIFO or socket is refused at once, never waited on, also through a link", () =>
    Effect.gen(function*() {
      const { workspace } = yield* setup
      for (const path of ["/fifo", "/fifo-link", "/socket"]) {
        assert.strictEqual(yield* tagOf(workspace.read(path)), "UnsupportedFile", path)
        assert.strictEqual(yield* tagOf(workspace.write(path, "x")), "UnsupportedFile", path)
        assert.strictEqual(yield* tagOf(workspace.edit(path, "a", "b", false)), "UnsupportedFile", path)
        assert.strictEqual(yield* tagOf(workspace.ls(path)), "UnsupportedFile", path)
      }
      // a link to a device outside the root is a path outside, as any link out is
      assert.strictEqual(yield* tagOf(workspace.read("/null")), "PathOutsideRoot")
      assert.strictEqual(yield* tagOf(workspace.write("/null", "x")), "PathOutsideRoot")
      const message = (yield* Effect.flip(workspace.read("/fifo"))).message
      assert.strictEqual(
        message,
        "\"/fifo\" is a FIFO; the workspace reads and writes only regular files with one link"
      )
    }).pipe(Effect.provide(NodeContext.layer)))

  it.scoped("a file that is not UTF-8 is refused, never re-encoded: edit leaves its bytes as they were", () =>
    Effect.gen(function*() {
      const { root, workspace } = yield* setup
      const latin1 = Uint8Array.from([0x63, 0x61, 0x66, 0xe9, 0x0a, 0x6f, 0x6b]) // "café\nok" in Latin-1
      NodeFs.writeFileSync(`${root}/latin1.txt`, latin1)
      assert.strictEqual(yield* tagOf(workspace.edit("/latin1.txt", "ok", "OK", false)), "NotUtf8")
      assert.strictEqual(yield* tagOf(workspace.read("/latin1.txt")), "NotUtf8")
      assert.deepStrictEqual(new Uint8Array(NodeFs.readFileSync(`${root}/latin1.txt`)), latin1)
      // text UTF-8 cannot encode (a lone surrogate) is not written as U+FFFD
      yield* workspace.write("/text.txt", "kept")
      assert.strictEqual(yield* tagOf(workspace.write("/text.txt", "bad \uD800 half")), "NotUtf8")
      assert.strictEqual(yield* tagOf(workspace.edit("/text.txt", "kept", "\uDC00", false)), "NotUtf8")
      assert.strictEqual(NodeFs.readFileSync(`${root}/text.txt`, "utf8"), "kept")
      // a byte order mark survives an edit
      NodeFs.writeFileSync(`${root}/bom.txt`, "\uFEFFhello")
      yield* workspace.edit("/bom.txt", "hello", "world", false)
      assert.deepStrictEqual([...NodeFs.readFileSync(`${root}/bom.txt`)].slice(0, 3), [0xef, 0xbb, 0xbf])
    }).pipe(Effect.provide(NodeContext.layer)))

  it.scoped(
    "no write, read or listing reaches outside the root while another process swaps a directory for a link",
    () =>
      Effect.gen(function*() {
        const fs = yield* FileSystem.FileSystem
        const root = yield* fs.makeTempDirectoryScoped()
        const outside = yield* fs.makeTempDirectoryScoped()
        yield* fs.writeFileString(`${outside}/outside-only.txt`, "outside")
        yield* fs.makeDirectory(`${root}/d`)
        yield* fs.writeFileString(`${root}/d/inside.txt`, "inside")
        yield* fs.symlink(outside, `${root}/link`)
        const workspace = yield* Workspace.makeDirectory({ root })
        // swaps root/d between the real directory and the link out, by renames, until killed (at most 5M times)
        yield* Effect.acquireRelease(
          Effect.sync(() =>
            spawn(process.execPath, [
              "-e",
              `const fs = require("fs"); const r = ${JSON.stringify(root)};
               for (let i = 0; i < 5000000; i++) {
                 try { fs.renameSync(r + "/d", r + "/real"); fs.renameSync(r + "/link", r + "/d");
                       fs.renameSync(r + "/d", r + "/link"); fs.renameSync(r + "/real", r + "/d") } catch {}
               }`
            ], { stdio: "ignore" })
          ),
          (child) => Effect.sync(() => child.kill())
        )
        const leaks: Array<string> = []
        yield* Effect.forEach(
          Array.from({ length: 300 }, (_, i) => i),
          (i) =>
            Effect.gen(function*() {
              yield* Effect.either(workspace.write(`/d/f${i}.txt`, "x"))
              yield* Effect.either(workspace.write(`/d/new${i}/deep/f.txt`, "x"))
              yield* Effect.either(workspace.edit("/d/inside.txt", "inside", "inside", false))
              const read = yield* Effect.either(workspace.read("/d/outside-only.txt"))
              if (Either.isRight(read)) leaks.push(`read ${read.right}`)
              if (i % 10 === 0) {
                const listed = yield* Effect.either(workspace.glob("**"))
                if (Either.isRight(listed) && listed.right.some((p) => p.includes("outside-only"))) leaks.push("glob")
                const entries = yield* Effect.either(workspace.ls("/d"))
                if (Either.isRight(entries) && entries.right.some((e) => e.path.includes("outside-only"))) {
                  leaks.push("ls")
                }
              }
            }),
          { concurrency: 8, discard: true }
        )
        assert.deepStrictEqual(leaks, [])
        assert.deepStrictEqual(NodeFs.readdirSync(outside), ["outside-only.txt"])
      }).pipe(Effect.provide(NodeContext.layer)),
    { timeout: 240_000 }
  )
})
