/**
 * `Workspace.remove` deletes one file under the rules of a write, and on a
 * directory never reaches outside the root: a link is deleted itself.
 */
import { FileSystem } from "@effect/platform"
import { NodeContext } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import type * as Scope from "effect/Scope"
import * as NodeFs from "node:fs"
import * as HostJail from "../src/internal/hostJail.js"
import * as Workspace from "../src/Workspace.js"

const reasonOf = <A>(effect: Effect.Effect<A, Workspace.WorkspaceError>) =>
  Effect.map(Effect.flip(effect), (error) => error.reason)

/** The checks every workspace passes, on one that holds "/a.txt", "/d/b.txt" and a read-only "/ro/c.txt". */
const contract = (workspace: Workspace.Service) =>
  Effect.gen(function*() {
    const remove = workspace.remove!
    yield* remove("/a.txt")
    assert.strictEqual(yield* reasonOf(workspace.read("/a.txt")), "NotFound")
    assert.strictEqual(yield* reasonOf(remove("/a.txt")), "NotFound")
    assert.strictEqual(yield* reasonOf(remove("/d")), "Io", "a directory is not deleted")
    assert.strictEqual(yield* workspace.read("/d/b.txt"), "b")
    assert.strictEqual(yield* reasonOf(remove("/ro/c.txt")), "ReadOnly")
    assert.strictEqual(yield* workspace.read("/ro/c.txt"), "c")
    assert.strictEqual(yield* reasonOf(remove("/../x")), "OutsideRoot")
    yield* remove("/d/b.txt")
    assert.deepStrictEqual(yield* workspace.glob("**"), ["/ro/c.txt"])
  })

const rules: Workspace.AccessOptions = { rules: [{ pattern: "/ro", access: "read-only" }] }

describe("Workspace.remove", () => {
  it.effect("in memory: deletes a file, under the rules of a write; a missing file or a directory is refused", () =>
    Effect.gen(function*() {
      const workspace = yield* Workspace.makeMemory({
        ...rules,
        files: { "/a.txt": "a", "/d/b.txt": "b", "/ro/c.txt": "c" }
      })
      yield* contract(workspace)
    }))

  it.effect("a composite routes it, with its own rules over the routed paths", () =>
    Effect.gen(function*() {
      const routed = yield* Workspace.makeMemory({ files: { "/x.txt": "x", "/y.txt": "y" } })
      const fallback = yield* Workspace.makeMemory({ files: { "/a.txt": "a" } })
      const workspace = yield* Workspace.composite(fallback, { "/mnt": routed }, {
        rules: [{ pattern: "/mnt/y.txt", access: "read-only" }]
      })
      yield* workspace.remove!("/mnt/x.txt")
      assert.strictEqual(yield* reasonOf(routed.read("/x.txt")), "NotFound")
      assert.strictEqual(yield* reasonOf(workspace.remove!("/mnt/y.txt")), "ReadOnly")
      assert.strictEqual(yield* routed.read("/y.txt"), "y")
      yield* workspace.remove!("/a.txt")
      assert.strictEqual(yield* reasonOf(fallback.read("/a.txt")), "NotFound")
      // a routed workspace that cannot delete refuses, typed
      const { remove: _remove, ...cannot } = yield* Workspace.makeMemory({ files: { "/z.txt": "z" } })
      const mixed = yield* Workspace.composite(fallback, { "/old": cannot })
      assert.strictEqual(yield* reasonOf(mixed.remove!("/old/z.txt")), "Unsupported")
    }))

  for (const useProcFd of [true, false]) {
    describe(useProcFd ? "on a directory, by descriptor" : "on a directory, portable", () => {
      const scoped = <A, E>(effect: Effect.Effect<A, E, FileSystem.FileSystem | Scope.Scope>) =>
        effect.pipe(
          Effect.scoped,
          Effect.provideService(HostJail.UseProcFd, useProcFd),
          Effect.provide(NodeContext.layer)
        )

      it.effect("deletes a file, under the rules of a write; a missing file or a directory is refused", () =>
        scoped(Effect.gen(function*() {
          const fs = yield* FileSystem.FileSystem
          const root = yield* fs.makeTempDirectoryScoped()
          NodeFs.mkdirSync(`${root}/d`)
          NodeFs.mkdirSync(`${root}/ro`)
          NodeFs.writeFileSync(`${root}/a.txt`, "a")
          NodeFs.writeFileSync(`${root}/d/b.txt`, "b")
          NodeFs.writeFileSync(`${root}/ro/c.txt`, "c")
          yield* contract(yield* Workspace.makeDirectory({ root, ...rules }))
          assert.isFalse(NodeFs.existsSync(`${root}/a.txt`))
          assert.isTrue(NodeFs.existsSync(`${root}/d`))
        })))

      it.effect("a link is deleted itself, never where it leads; a link on the way out of the root is refused", () =>
        scoped(Effect.gen(function*() {
          const fs = yield* FileSystem.FileSystem
          const root = yield* fs.makeTempDirectoryScoped()
          const outside = yield* fs.makeTempDirectoryScoped()
          NodeFs.writeFileSync(`${outside}/ofl.txt`, "outside")
          // a link to a file outside, and a directory link out of the root
          NodeFs.symlinkSync(`${outside}/ofl.txt`, `${root}/link.txt`)
          NodeFs.symlinkSync(outside, `${root}/out`)
          const workspace = yield* Workspace.makeDirectory({ root })
          assert.strictEqual(yield* reasonOf(workspace.remove!("/out/ofl.txt")), "OutsideRoot")
          yield* workspace.remove!("/link.txt")
          assert.isFalse(NodeFs.existsSync(`${root}/link.txt`))
          assert.strictEqual(NodeFs.readFileSync(`${outside}/ofl.txt`, "utf8"), "outside")
        })))
    })
  }
})
