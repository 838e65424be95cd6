import { FileSystem } from "@effect/platform"
import { NodeContext } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import { Deferred, Effect, Either, Exit, Fiber } from "effect"
import { execFileSync, spawn } from "node:child_process"
import * as NodeFs from "node:fs"
import * as Net from "node:net"
import * as HostJail from "../src/internal/hostJail.js"
import * as Workspace from "../src/Workspace.js"

const reasonOf = <A>(effect: Effect.Effect<A, Workspace.WorkspaceError>) =>
  Effect.map(Effect.flip(effect), (error) => error.reason)

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

/**
 * A process that swaps `root/d` for the link `root/link` out of the root and back, by renames, until killed
 * (`quiet`/`away`: a JavaScript expression of the milliseconds it waits before a swap, and before the swap back).
 * A directory the jail made at `d` in the instant it was missing (as a write does) is moved aside to `stray-N`
 * inside the root, so the swapping goes on: the path keeps leading out of the root and back.
 */
const spawnSwapper = (root: string, timing?: { readonly quiet: string; readonly away: string }) =>
  Effect.acquireRelease(
    Effect.sync(() =>
      spawn(process.execPath, [
        "-e",
        `const fs = require("fs"); const r = ${JSON.stringify(root)}; let strays = 0
         const wait = (ms) => { const end = Date.now() + ms; while (Date.now() < end) {} }
         const move = (from, to) => {
           try { fs.renameSync(r + from, r + to) } catch (error) {
             if (error.code === "ENOENT") throw error
             fs.renameSync(r + to, r + "/stray-" + strays++); fs.renameSync(r + from, r + to)
           }
         }
         process.stdout.write("swapping\\n")
         for (let i = 0; i < 5000000; i++) {
           ${timing === undefined ? "" : `wait(${timing.quiet})`}
           try { move("/d", "/real"); move("/link", "/d")
                 ${timing === undefined ? "" : `wait(${timing.away})`}
                 move("/d", "/link"); move("/real", "/d") } catch {}
         }`
      ], { stdio: ["ignore", "pipe", "ignore"] })
    ),
    (child) => Effect.sync(() => child.kill())
  ).pipe(
    // the operations start once it says it has begun (a swapper that ends first fails the test, never hangs it)
    Effect.tap((swapper) =>
      Effect.async<void>((resume) => {
        swapper.stdout.once("data", () => resume(Effect.void))
        swapper.once("exit", (code) => resume(Effect.dieMessage(`the swapper ended before it began (${code})`)))
      })
    )
  )

/**
 * For a test seam around one call of the jail's `fs`: `root/d` is the link `root/link` out of the root exactly
 * while that call runs (the instant a swap must hit), then the real directory again for `ticks` × 100 ms while the
 * root keeps changing, then the link for good (`settled` ends then).
 */
const swapAroundOnce = (root: string, ticks: number) => {
  const swap = () => {
    NodeFs.renameSync(`${root}/d`, `${root}/real`)
    NodeFs.renameSync(`${root}/link`, `${root}/d`)
  }
  const swapBack = () => {
    NodeFs.renameSync(`${root}/d`, `${root}/link`)
    NodeFs.renameSync(`${root}/real`, `${root}/d`)
  }
  let settled: Promise<void> | undefined
  return {
    fired: () => settled !== undefined,
    settled: () => settled,
    around: async <A>(call: () => Promise<A>): Promise<A> => {
      swap()
      try {
        return await call()
      } finally {
        swapBack()
        settled = (async () => {
          for (let i = 0; i < ticks; i++) {
            await new Promise((resolve) => setTimeout(resolve, 100))
            NodeFs.writeFileSync(`${root}/tick-${i}`, "")
          }
          swap()
        })()
      }
    }
  }
}

/**
 * The jail's two strategies: descriptors named through `/proc/self/fd` (Linux), and the portable one of macOS and
 * Windows, run here by the test seam that turns the first off. Every test runs with each.
 */
const strategies = [
  { name: "by descriptor (/proc/self/fd)", useProcFd: true, swaps: 300 },
  // the portable strategy waits for a quiet directory: fewer rounds keep the swap test short
  { name: "portable (macOS, Windows)", useProcFd: false, swaps: 100 }
] as const

for (const strategy of strategies) {
  describe(`Workspace on a directory: the jail, ${strategy.name}`, () => {
    const inStrategy = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
      effect.pipe(Effect.provideService(HostJail.UseProcFd, strategy.useProcFd), Effect.provide(NodeContext.layer))

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
        assert.strictEqual(yield* reasonOf(workspace.glob("**", "/etc")), "OutsideRoot")
        assert.strictEqual(yield* reasonOf(workspace.grep("secret", { path: "/etc" })), "OutsideRoot")
        assert.strictEqual(yield* reasonOf(workspace.ls("/etc")), "OutsideRoot")
        assert.strictEqual(yield* reasonOf(workspace.ls("/linkfile")), "OutsideRoot")
        // a link inside the root works
        assert.deepStrictEqual((yield* workspace.ls("/inner-dir")).map((e) => e.path), ["/inner-dir/guide.md"])
        assert.strictEqual(yield* workspace.read("/inner-dir/guide.md"), "guide\nneedle")
      }).pipe(inStrategy))

    it.scoped(
      "a root renamed away and replaced (by a link out, another directory, or nothing) refuses every operation",
      () =>
        Effect.gen(function*() {
          const fs = yield* FileSystem.FileSystem
          const base = yield* fs.makeTempDirectoryScoped()
          const outside = yield* fs.makeTempDirectoryScoped()
          yield* fs.writeFileString(`${outside}/a.txt`, "OUTSIDE")
          yield* fs.makeDirectory(`${outside}/sub`)
          const replacements = [
            { name: "a link to a directory outside", put: (root: string) => fs.symlink(outside, root) },
            {
              name: "another directory",
              put: (root: string) =>
                Effect.zipRight(fs.makeDirectory(root), fs.writeFileString(`${root}/a.txt`, "OUTSIDE"))
            },
            { name: "nothing", put: () => Effect.void }
          ]
          for (const [index, replacement] of replacements.entries()) {
            const root = `${base}/root${index}`
            yield* fs.makeDirectory(`${root}/sub`, { recursive: true })
            yield* fs.writeFileString(`${root}/a.txt`, "inside")
            const workspace = yield* Workspace.makeDirectory({ root })
            assert.strictEqual(yield* workspace.read("/a.txt"), "inside")
            yield* fs.rename(root, `${base}/moved${index}`)
            yield* replacement.put(root)
            const there = () =>
              [outside, root].map((dir) => NodeFs.existsSync(dir) ? NodeFs.readdirSync(dir).sort() : [])
            const before = there()
            const operations: ReadonlyArray<readonly [string, Effect.Effect<unknown, Workspace.WorkspaceError>]> = [
              ["read", workspace.read("/a.txt")],
              ["write", workspace.write("/b.txt", "x")],
              ["write in a new directory", workspace.write("/new/b.txt", "x")],
              ["write over a file", workspace.write("/a.txt", "x")],
              ["edit", workspace.edit("/a.txt", "OUTSIDE", "x", false)],
              ["remove", workspace.remove!("/a.txt")],
              ["ls", workspace.ls("/")],
              ["ls of a directory", workspace.ls("/sub")],
              ["glob", workspace.glob("**")],
              ["grep", workspace.grep("OUTSIDE")]
            ]
            for (const [name, operation] of operations) {
              const error = yield* Effect.flip(operation)
              assert.strictEqual(error.reason, "Io", `${replacement.name}: ${name}`)
              assert.include(
                error.detail,
                "root directory was moved, replaced or removed",
                `${replacement.name}: ${name}`
              )
            }
            // nothing made or deleted where the root's path leads now
            assert.deepStrictEqual(there(), before, replacement.name)
            assert.strictEqual(NodeFs.readFileSync(`${outside}/a.txt`, "utf8"), "OUTSIDE")
            assert.deepStrictEqual(NodeFs.readdirSync(`${base}/moved${index}`).sort(), ["a.txt", "sub"])
          }
        }).pipe(inStrategy),
      { timeout: 60_000 }
    )

    it.scoped("a directory above the root swapped for a link to a tree with a directory of the root's name", () =>
      Effect.gen(function*() {
        const fs = yield* FileSystem.FileSystem
        const base = yield* fs.makeTempDirectoryScoped()
        const outside = yield* fs.makeTempDirectoryScoped()
        yield* fs.makeDirectory(`${outside}/root`)
        yield* fs.writeFileString(`${outside}/root/a.txt`, "OUTSIDE")
        yield* fs.makeDirectory(`${base}/above/root`, { recursive: true })
        yield* fs.writeFileString(`${base}/above/root/a.txt`, "inside")
        const workspace = yield* Workspace.makeDirectory({ root: `${base}/above/root` })
        yield* fs.rename(`${base}/above`, `${base}/moved`)
        yield* fs.symlink(outside, `${base}/above`)
        for (
          const operation of [
            workspace.read("/a.txt"),
            workspace.write("/b.txt", "x"),
            workspace.remove!("/a.txt"),
            workspace.ls("/"),
            workspace.glob("**")
          ]
        ) {
          assert.strictEqual((yield* Effect.flip(operation)).reason, "Io")
        }
        assert.deepStrictEqual(NodeFs.readdirSync(`${outside}/root`), ["a.txt"])
        assert.strictEqual(NodeFs.readFileSync(`${outside}/root/a.txt`, "utf8"), "OUTSIDE")
      }).pipe(inStrategy))

    it.scoped(
      "a root swapped for a link out at any step of an operation: nothing outside is answered, made or deleted",
      () =>
        Effect.gen(function*() {
          const fs = yield* FileSystem.FileSystem
          const base = yield* fs.makeTempDirectoryScoped()
          const outsides = yield* fs.makeTempDirectoryScoped()
          const operations: ReadonlyArray<
            readonly [string, (workspace: Workspace.Service) => Effect.Effect<unknown, Workspace.WorkspaceError>]
          > = [
            ["read", (workspace) => workspace.read("/a.txt")],
            ["write", (workspace) => workspace.write("/b.txt", "x")],
            ["write over a file", (workspace) => workspace.write("/a.txt", "x")],
            // (the portable strategy looks for a directory it made for 2 s after each swap: too long to sweep)
            ...(strategy.useProcFd
              ? [
                [
                  "write in a new directory",
                  (workspace: Workspace.Service) => workspace.write("/new/b.txt", "x")
                ] as const
              ]
              : []),
            ["edit", (workspace) => workspace.edit("/a.txt", "OUTSIDE", "x", false)],
            ["remove", (workspace) => workspace.remove!("/a.txt")],
            ["ls", (workspace) => workspace.ls("/")],
            ["glob", (workspace) => workspace.glob("**")],
            ["grep", (workspace) => workspace.grep("OUTSIDE")]
          ]
          let runs = 0
          /**
           * A directory for the root of a run, and an outside of its own, made before the runs beside it start: each
           * run's swaps and searches change none of the directories of another run, as when they ran one by one.
           */
          const prepare = () => {
            const run = ++runs
            const outside = `${outsides}/${run}`
            NodeFs.mkdirSync(`${base}/${run}`)
            NodeFs.mkdirSync(outside)
            NodeFs.writeFileSync(`${outside}/a.txt`, "OUTSIDE")
            NodeFs.writeFileSync(`${outside}/keep.txt`, "OUTSIDE")
            return { directory: `${base}/${run}`, outside }
          }
          /** `operation` on a root of its own, swapped right before the k-th file system call; how many it made. */
          const swappedAt = (
            { directory, outside }: ReturnType<typeof prepare>,
            name: string,
            operation: (workspace: Workspace.Service) => Effect.Effect<unknown, Workspace.WorkspaceError>,
            k: number
          ) =>
            Effect.gen(function*() {
              const root = `${directory}/root`
              yield* fs.makeDirectory(`${root}/sub`, { recursive: true })
              yield* fs.writeFileString(`${root}/a.txt`, "inside")
              let calls: number | undefined
              const before = () => {
                if (calls === undefined || ++calls !== k) return
                NodeFs.renameSync(root, `${directory}/moved`)
                NodeFs.symlinkSync(outside, root)
              }
              const hooked = (real: HostJail.NodeFs): HostJail.NodeFs => {
                const p = real.promises
                const hook = <A extends ReadonlyArray<unknown>, B>(f: (...args: A) => Promise<B>) => (...args: A) => {
                  before()
                  return f(...args)
                }
                return {
                  ...real,
                  promises: {
                    open: hook(p.open),
                    stat: hook(p.stat),
                    lstat: hook(p.lstat),
                    readlink: hook(p.readlink),
                    realpath: hook(p.realpath),
                    mkdir: hook(p.mkdir),
                    rename: hook(p.rename),
                    unlink: hook(p.unlink),
                    rmdir: hook(p.rmdir),
                    readdir: hook(p.readdir)
                  }
                }
              }
              const workspace = yield* Workspace.makeDirectory({ root }).pipe(
                Effect.provideService(HostJail.WrapNodeFs, hooked)
              )
              calls = 0
              const result = yield* Effect.either(operation(workspace))
              const at = `${name}, swapped before call ${k}`
              assert.notInclude(JSON.stringify(Either.getOrUndefined(result)) ?? "", "OUTSIDE", at)
              assert.notInclude(JSON.stringify(Either.getOrUndefined(result)) ?? "", "keep.txt", at)
              assert.deepStrictEqual(NodeFs.readdirSync(outside, { recursive: true }).sort(), ["a.txt", "keep.txt"], at)
              assert.strictEqual(NodeFs.readFileSync(`${outside}/a.txt`, "utf8"), "OUTSIDE", at)
              return calls
            })
          for (const [name, operation] of operations) {
            // the swap lands right before the k-th file system call of the operation, for every k it makes: the k are
            // tried eight at a time (the portable strategy waits for each fresh root to be quiet), until one of them
            // finds the operation done in fewer than k calls
            for (let first = 1, done = false; !done && first < 80; first += 8) {
              const ks = Array.from({ length: Math.min(8, 80 - first) }, (_, i) => first + i)
              const prepared = ks.map(prepare)
              const made = yield* Effect.forEach(ks, (k, i) => swappedAt(prepared[i]!, name, operation, k), {
                concurrency: "unbounded"
              })
              done = made.some((calls, i) => calls < ks[i]!)
            }
          }
        }).pipe(inStrategy),
      { timeout: 120_000 }
    )

    it.scoped("a hard link to a file outside is neither read nor written nor edited", () =>
      Effect.gen(function*() {
        const { fs, outside, workspace } = yield* setup
        const refusal = yield* Effect.flip(workspace.read("/hard"))
        assert.isTrue(refusal.reason === "Unsupported" && refusal.detail === "hard link")
        assert.strictEqual(yield* reasonOf(workspace.write("/hard", "overwritten")), "Unsupported")
        assert.strictEqual(yield* reasonOf(workspace.edit("/hard", "secret", "x", false)), "Unsupported")
        assert.strictEqual(yield* reasonOf(workspace.ls("/hard")), "Unsupported")
        assert.strictEqual(yield* fs.readFileString(`${outside}/secret.txt`), "secret")
      }).pipe(inStrategy))

    it.scoped("a FIFO or socket is refused at once, never waited on, also through a link", () =>
      Effect.gen(function*() {
        const { workspace } = yield* setup
        for (const path of ["/fifo", "/fifo-link", "/socket"]) {
          assert.strictEqual(yield* reasonOf(workspace.read(path)), "Unsupported", path)
          assert.strictEqual(yield* reasonOf(workspace.write(path, "x")), "Unsupported", path)
          assert.strictEqual(yield* reasonOf(workspace.edit(path, "a", "b", false)), "Unsupported", path)
          assert.strictEqual(yield* reasonOf(workspace.ls(path)), "Unsupported", path)
        }
        // a link to a device outside the root is a path outside, as any link out is
        assert.strictEqual(yield* reasonOf(workspace.read("/null")), "OutsideRoot")
        assert.strictEqual(yield* reasonOf(workspace.write("/null", "x")), "OutsideRoot")
        const message = (yield* Effect.flip(workspace.read("/fifo"))).message
        assert.strictEqual(
          message,
          "\"/fifo\" is a FIFO; the workspace reads and writes only regular files with one link"
        )
      }).pipe(inStrategy))

    it.scoped("a file that is not UTF-8 is refused, never re-encoded: edit leaves its bytes as they were", () =>
      Effect.gen(function*() {
        const { root, workspace } = yield* setup
        const latin1 = Uint8Array.from([0x63, 0x61, 0x66, 0xe9, 0x0a, 0x6f, 0x6b]) // "café\nok" in Latin-1
        NodeFs.writeFileSync(`${root}/latin1.txt`, latin1)
        assert.strictEqual(yield* reasonOf(workspace.edit("/latin1.txt", "ok", "OK", false)), "NotUtf8")
        assert.strictEqual(yield* reasonOf(workspace.read("/latin1.txt")), "NotUtf8")
        assert.deepStrictEqual(new Uint8Array(NodeFs.readFileSync(`${root}/latin1.txt`)), latin1)
        // text UTF-8 cannot encode (a lone surrogate) is not written as U+FFFD
        yield* workspace.write("/text.txt", "kept")
        assert.strictEqual(yield* reasonOf(workspace.write("/text.txt", "bad \uD800 half")), "NotUtf8")
        assert.strictEqual(yield* reasonOf(workspace.edit("/text.txt", "kept", "\uDC00", false)), "NotUtf8")
        assert.strictEqual(NodeFs.readFileSync(`${root}/text.txt`, "utf8"), "kept")
        // a byte order mark survives an edit
        NodeFs.writeFileSync(`${root}/bom.txt`, "\uFEFFhello")
        yield* workspace.edit("/bom.txt", "hello", "world", false)
        assert.deepStrictEqual([...NodeFs.readFileSync(`${root}/bom.txt`)].slice(0, 3), [0xef, 0xbb, 0xbf])
      }).pipe(inStrategy))

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
          // swaps root/d between the real directory and the link out as fast as it can
          yield* spawnSwapper(root)
          const leaks: Array<string> = []
          yield* Effect.forEach(
            Array.from({ length: strategy.swaps }, (_, i) => i),
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
        }).pipe(inStrategy),
      { timeout: 240_000 }
    )

    it.scoped(
      "a write that meets a swap leaves nothing outside the root: no content, and no file or directory it made",
      () =>
        Effect.gen(function*() {
          const fs = yield* FileSystem.FileSystem
          const root = yield* fs.makeTempDirectoryScoped()
          const outside = yield* fs.makeTempDirectoryScoped()
          yield* fs.writeFileString(`${outside}/outside-only.txt`, "outside")
          yield* fs.makeDirectory(`${root}/d`)
          yield* fs.symlink(outside, `${root}/link`)
          const workspace = yield* Workspace.makeDirectory({ root })
          // leaves root/d quiet long enough to be relied on (50 ms), then swaps it for the link out for a while:
          // the portable strategy's window between its checks and a create
          yield* spawnSwapper(root, { quiet: "50 + Math.random() * 15", away: "10 + Math.random() * 20" })
          yield* Effect.forEach(
            Array.from({ length: 200 }, (_, i) => i),
            (i) =>
              Effect.gen(function*() {
                yield* Effect.either(workspace.write(`/d/f${i}.txt`, "x"))
                yield* Effect.either(workspace.write(`/d/new${i}/deep/f.txt`, "x"))
              }),
            { concurrency: 8, discard: true }
          )
          assert.deepStrictEqual(NodeFs.readdirSync(outside, { recursive: true }), ["outside-only.txt"])
          assert.strictEqual(NodeFs.readFileSync(`${outside}/outside-only.txt`, "utf8"), "outside")
        }).pipe(inStrategy),
      { timeout: 240_000 }
    )

    if (!strategy.useProcFd) {
      it.scoped("a failed write removes the directories and file it made (portable strategy)", () =>
        Effect.gen(function*() {
          const fs = yield* FileSystem.FileSystem
          const root = yield* fs.makeTempDirectoryScoped()
          const workspace = yield* Workspace.makeDirectory({ root })
          // the directories are made, then the file's name is too long for the file system
          assert.strictEqual(yield* reasonOf(workspace.write(`/a/b/${"x".repeat(300)}`, "x")), "Io")
          assert.deepStrictEqual(NodeFs.readdirSync(root), [])
        }).pipe(inStrategy))

      for (const made of ["directory", "file"] as const) {
        it.scoped(
          `a ${made} a swap put outside is removed however long the path leads elsewhere, while it keeps changing`,
          () =>
            Effect.gen(function*() {
              const fs = yield* FileSystem.FileSystem
              const root = yield* fs.makeTempDirectoryScoped()
              const outside = yield* fs.makeTempDirectoryScoped()
              yield* fs.makeDirectory(`${root}/d`)
              yield* fs.symlink(outside, `${root}/link`)
              // root/d leads out exactly while the new directory or file is made, then back in for longer than
              // any fixed wait would look (2.5 s), then out again
              const once = swapAroundOnce(root, 25)
              const wrap = (real: HostJail.NodeFs): HostJail.NodeFs => ({
                ...real,
                promises: {
                  ...real.promises,
                  mkdir: (path) =>
                    made === "directory" && !once.fired() && path.endsWith("/d/new")
                      ? once.around(() => real.promises.mkdir(path))
                      : real.promises.mkdir(path),
                  open: (path, flags, mode) =>
                    made === "file" && !once.fired() && path.endsWith("/d/f.txt")
                      ? once.around(() => real.promises.open(path, flags, mode))
                      : real.promises.open(path, flags, mode)
                }
              })
              const workspace = yield* Workspace.makeDirectory({ root }).pipe(
                Effect.provideService(HostJail.WrapNodeFs, wrap)
              )
              yield* Effect.either(workspace.write(made === "directory" ? "/d/new/f.txt" : "/d/f.txt", "x"))
              assert.isTrue(once.fired())
              yield* Effect.promise(() => once.settled()!)
              assert.deepStrictEqual(NodeFs.readdirSync(outside), [])
            }).pipe(inStrategy),
          { timeout: 60_000 }
        )
      }

      it.scoped(
        "a remove that meets a swap deletes no file outside the root: what the swap led to is put back",
        () =>
          Effect.gen(function*() {
            const fs = yield* FileSystem.FileSystem
            const root = yield* fs.makeTempDirectoryScoped()
            const outside = yield* fs.makeTempDirectoryScoped()
            yield* fs.makeDirectory(`${root}/d`)
            yield* fs.writeFileString(`${root}/d/x.txt`, "inside")
            yield* fs.writeFileString(`${outside}/x.txt`, "outside")
            yield* fs.symlink(outside, `${root}/link`)
            // root/d leads out exactly while the file is deleted (or moved aside to be), then back in a while, then out
            const once = swapAroundOnce(root, 5)
            const wrap = (real: HostJail.NodeFs): HostJail.NodeFs => ({
              ...real,
              promises: {
                ...real.promises,
                unlink: (path) =>
                  !once.fired() && path.endsWith("/d/x.txt")
                    ? once.around(() => real.promises.unlink(path))
                    : real.promises.unlink(path),
                rename: (from, to) =>
                  !once.fired() && from.endsWith("/d/x.txt")
                    ? once.around(() => real.promises.rename(from, to))
                    : real.promises.rename(from, to)
              }
            })
            const workspace = yield* Workspace.makeDirectory({ root }).pipe(
              Effect.provideService(HostJail.WrapNodeFs, wrap)
            )
            yield* Effect.either(workspace.remove!("/d/x.txt"))
            assert.isTrue(once.fired())
            yield* Effect.promise(() => once.settled()!)
            assert.deepStrictEqual(NodeFs.readdirSync(outside), ["x.txt"])
            assert.strictEqual(NodeFs.readFileSync(`${outside}/x.txt`, "utf8"), "outside")
          }).pipe(inStrategy),
        { timeout: 60_000 }
      )

      it.scoped("an interrupted write removes the directories it made (portable strategy)", () =>
        Effect.gen(function*() {
          const fs = yield* FileSystem.FileSystem
          const root = yield* fs.makeTempDirectoryScoped()
          // the look for /a/b never answers: the write is interrupted there, after it made /a
          const held = yield* Deferred.make<void>()
          const wrap = (real: HostJail.NodeFs): HostJail.NodeFs => ({
            ...real,
            promises: {
              ...real.promises,
              lstat: (path) => {
                if (!path.endsWith("/a/b")) return real.promises.lstat(path)
                Deferred.unsafeDone(held, Exit.void)
                return new Promise(() => {})
              }
            }
          })
          const workspace = yield* Workspace.makeDirectory({ root }).pipe(
            Effect.provideService(HostJail.WrapNodeFs, wrap)
          )
          const write = yield* Effect.fork(workspace.write("/a/b/f.txt", "x"))
          yield* Deferred.await(held)
          assert.deepStrictEqual(NodeFs.readdirSync(root), ["a"])
          yield* Fiber.interrupt(write)
          assert.deepStrictEqual(NodeFs.readdirSync(root), [])
        }).pipe(inStrategy))
    }

    it.scoped("a read-only rule holds through a link inside the root: no write, edit or new directory lands there", () =>
      Effect.gen(function*() {
        const fs = yield* FileSystem.FileSystem
        const root = yield* fs.makeTempDirectoryScoped()
        yield* fs.makeDirectory(`${root}/docs`)
        yield* fs.writeFileString(`${root}/docs/a.md`, "doc")
        yield* fs.symlink("docs", `${root}/alias`)
        yield* fs.symlink(".", `${root}/self`)
        yield* fs.symlink("docs/a.md", `${root}/a-link.md`)
        const workspace = yield* Workspace.makeDirectory({ root, rules: [{ pattern: "/docs", access: "read-only" }] })
        for (const path of ["/alias/new.md", "/self/docs/new.md", "/alias/sub/new.md", "/self/self/docs/a.md"]) {
          assert.strictEqual(yield* reasonOf(workspace.write(path, "x")), "ReadOnly", path)
        }
        for (const path of ["/alias/a.md", "/a-link.md", "/self/docs/a.md"]) {
          assert.strictEqual(yield* reasonOf(workspace.edit(path, "doc", "changed", false)), "ReadOnly", path)
          assert.strictEqual(yield* reasonOf(workspace.write(path, "changed")), "ReadOnly", path)
        }
        assert.deepStrictEqual(NodeFs.readdirSync(`${root}/docs`), ["a.md"])
        assert.strictEqual(NodeFs.readFileSync(`${root}/docs/a.md`, "utf8"), "doc")
        // reading through the link, and writing outside the rule through a link, still work
        assert.strictEqual(yield* workspace.read("/alias/a.md"), "doc")
        yield* workspace.write("/self/free.md", "ok")
        assert.strictEqual(NodeFs.readFileSync(`${root}/free.md`, "utf8"), "ok")
      }).pipe(inStrategy))

    it.scoped(
      "a file larger than maxFileBytes is refused without being read whole (read, edit, grep) and never written",
      () =>
        Effect.gen(function*() {
          const fs = yield* FileSystem.FileSystem
          const root = yield* fs.makeTempDirectoryScoped()
          // a sparse 3 GB file: reading it whole would need 3 GB (more than a Node buffer holds)
          const handle = NodeFs.openSync(`${root}/huge.txt`, "w")
          NodeFs.ftruncateSync(handle, 3 * 1024 ** 3)
          NodeFs.closeSync(handle)
          yield* fs.writeFileString(`${root}/small.txt`, "needle")
          const workspace = yield* Workspace.makeDirectory({ root })
          const refusal = yield* Effect.flip(workspace.read("/huge.txt"))
          assert.isTrue(
            refusal.reason === "TooLarge" && refusal.size === 3 * 1024 ** 3 &&
              refusal.max === Workspace.defaultMaxFileBytes,
            refusal.message
          )
          assert.strictEqual(yield* reasonOf(workspace.edit("/huge.txt", "a", "b", false)), "TooLarge")
          assert.deepStrictEqual((yield* workspace.grep("needle")).map((m) => m.path), ["/small.txt"])
          // the limit is the option's, to the byte
          const tight = yield* Workspace.makeDirectory({ root, maxFileBytes: 6 })
          assert.strictEqual(yield* tight.read("/small.txt"), "needle")
          yield* fs.writeFileString(`${root}/small.txt`, "needles")
          assert.strictEqual(yield* reasonOf(tight.read("/small.txt")), "TooLarge")
          // nor is a file written that the workspace would not read back: the limit counts UTF-8 bytes
          const written = yield* Effect.flip(tight.write("/big.txt", "éééé"))
          assert.isTrue(written.reason === "TooLarge" && written.size === 8 && written.max === 6, written.message)
          assert.isFalse(yield* fs.exists(`${root}/big.txt`))
          yield* fs.writeFileString(`${root}/six.txt`, "needle")
          assert.strictEqual(yield* reasonOf(tight.edit("/six.txt", "needle", "needles", false)), "TooLarge")
          assert.strictEqual(yield* fs.readFileString(`${root}/six.txt`), "needle")
          yield* tight.write("/fits.txt", "ééé")
          assert.strictEqual(yield* tight.read("/fits.txt"), "ééé")
          const invalid = yield* Effect.flip(Workspace.makeDirectory({ root, maxFileBytes: -1 }))
          assert.strictEqual(invalid._tag, "InvalidOptions")
        }).pipe(inStrategy),
      { timeout: 60_000 }
    )

    it.scoped(
      "a directory nested deeper than the kernel can name is left out of glob and grep, not fatal to them",
      () =>
        Effect.gen(function*() {
          const fs = yield* FileSystem.FileSystem
          const root = yield* fs.makeTempDirectoryScoped()
          yield* fs.writeFileString(`${root}/top.txt`, "needle")
          // 25 levels of 200-character names: a path past PATH_MAX (4096), made by relative steps
          yield* Effect.acquireRelease(
            Effect.sync(() =>
              execFileSync(process.execPath, [
                "-e",
                `process.chdir(${JSON.stringify(root)}); const fs = require("fs")
             for (let i = 0; i < 25; i++) { fs.mkdirSync("d".repeat(200)); process.chdir("d".repeat(200)) }
             fs.writeFileSync("deep.txt", "needle")`
              ])
            ),
            () => Effect.sync(() => execFileSync("rm", ["-rf", `${root}/${"d".repeat(200)}`]))
          )
          const workspace = yield* Workspace.makeDirectory({ root })
          const found = yield* workspace.glob("**/*.txt")
          assert.include(found, "/top.txt")
          assert.isTrue(found.every((path) => path.length < 4096))
          assert.include((yield* workspace.grep("needle")).map((m) => m.path), "/top.txt")
        }).pipe(inStrategy),
      { timeout: 60_000 }
    )
  })
}
