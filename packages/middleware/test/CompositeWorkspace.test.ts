import type { Prompt } from "@effect/ai"
import { LanguageModel } from "@effect/ai"
import { FileSystem } from "@effect/platform"
import { NodeContext } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import { Agent } from "@stepwise-agent/core"
import { ScriptedModel } from "@stepwise-agent/testing"
import { Effect, Either, FastCheck } from "effect"
import * as Filesystem from "../src/Filesystem.js"
import * as Workspace from "../src/Workspace.js"

const memory = (files: Record<string, string> = {}) => Workspace.makeMemory({ files })
const reasonOf = <A>(effect: Effect.Effect<A, Workspace.WorkspaceError>) =>
  Effect.map(Effect.flip(effect), (error) => [error.reason, error.path] as const)
const listing = (entries: ReadonlyArray<Workspace.Entry>) =>
  entries.map((entry) => `${entry.path}${entry.isDirectory ? "/" : ""}`)

describe("Workspace.composite", () => {
  it.effect("routes each path to its longest prefix, by whole segments; routed workspaces see their own paths", () =>
    Effect.gen(function*() {
      const fallback = yield* memory()
      const a = yield* memory()
      const ab = yield* memory()
      const workspace = yield* Workspace.composite(fallback, { "/a": a, "/a/b/": ab })
      yield* workspace.write("/a/b/c.txt", "in ab")
      yield* workspace.write("/a/x.txt", "in a")
      yield* workspace.write("/ab.txt", "in fallback")
      yield* workspace.write("/a/bb/y.txt", "in a too")
      assert.strictEqual(yield* ab.read("/c.txt"), "in ab")
      assert.strictEqual(yield* a.read("/x.txt"), "in a")
      assert.strictEqual(yield* a.read("/bb/y.txt"), "in a too")
      assert.strictEqual(yield* fallback.read("/ab.txt"), "in fallback")
      assert.deepStrictEqual(yield* fallback.glob("**"), ["/ab.txt"])
      assert.strictEqual(yield* workspace.edit("/a/b/c.txt", "ab", "AB", false), 1)
      assert.strictEqual(yield* workspace.read("/a/b/c.txt"), "in AB")
      // a route's own root
      assert.deepStrictEqual(listing(yield* workspace.ls("/a/b")), ["/a/b/c.txt"])
    }))

  it.effect("nested mounts: ls, glob and grep of an outer route show the inner route, never the outer's files it hides", () =>
    Effect.gen(function*() {
      const outer = yield* memory({ "/x.md": "needle outer", "/b/hidden.md": "needle hidden" })
      const inner = yield* memory({ "/c.md": "needle inner" })
      const workspace = yield* Workspace.composite(yield* memory({ "/top.md": "needle top" }), {
        "/a": outer,
        "/a/b/": inner
      })
      const paths = (matches: ReadonlyArray<Workspace.GrepMatch>) => matches.map((match) => match.path)
      assert.deepStrictEqual(listing(yield* workspace.ls("/a")), ["/a/b/", "/a/x.md"])
      assert.deepStrictEqual(listing(yield* workspace.ls("/a/")), ["/a/b/", "/a/x.md"])
      assert.deepStrictEqual(listing(yield* workspace.ls("/a/b")), ["/a/b/c.md"])
      assert.deepStrictEqual(yield* workspace.glob("**", "/a"), ["/a/b/c.md", "/a/x.md"])
      assert.deepStrictEqual(yield* workspace.glob("**/*.md"), ["/a/b/c.md", "/a/x.md", "/top.md"])
      assert.deepStrictEqual(yield* workspace.glob("/a/**"), ["/a/b/c.md", "/a/x.md"])
      assert.deepStrictEqual(paths(yield* workspace.grep("needle", { path: "/a" })), ["/a/b/c.md", "/a/x.md"])
      assert.deepStrictEqual(paths(yield* workspace.grep("needle")), ["/a/b/c.md", "/a/x.md", "/top.md"])
      assert.deepStrictEqual(paths(yield* workspace.grep("needle", { path: "/a", glob: "**/c.md" })), ["/a/b/c.md"])
      assert.strictEqual((yield* Effect.flip(workspace.read("/a/b/hidden.md"))).reason, "NotFound")
    }))

  it.effect("ls, glob and grep merge every workspace, and hide the fallback's files a route covers", () =>
    Effect.gen(function*() {
      const fallback = yield* memory({ "/notes.md": "needle one", "/memories/hidden.md": "needle hidden" })
      const memories = yield* memory({ "/user.md": "needle two\nno", "/deep/x.md": "x" })
      const workspace = yield* Workspace.composite(fallback, { "/memories": memories, "/mnt/tmp": yield* memory() })
      assert.deepStrictEqual(listing(yield* workspace.ls("/")), ["/memories/", "/mnt/", "/notes.md"])
      assert.deepStrictEqual(listing(yield* workspace.ls("/mnt")), ["/mnt/tmp/"])
      assert.deepStrictEqual(listing(yield* workspace.ls("/memories")), ["/memories/deep/", "/memories/user.md"])
      assert.deepStrictEqual(yield* workspace.glob("**/*.md"), [
        "/memories/deep/x.md",
        "/memories/user.md",
        "/notes.md"
      ])
      assert.deepStrictEqual(yield* workspace.glob("*.md", "/memories"), ["/memories/user.md"])
      assert.deepStrictEqual(yield* workspace.glob("/memories/**/x.md"), ["/memories/deep/x.md"])
      assert.deepStrictEqual(
        (yield* workspace.grep("needle")).map((m) => `${m.path}:${m.line}`),
        ["/memories/user.md:1", "/notes.md:1"]
      )
      assert.deepStrictEqual(
        (yield* workspace.grep("needle", { glob: "memories/*.md" })).map((m) => m.path),
        ["/memories/user.md"]
      )
      assert.deepStrictEqual(
        (yield* workspace.grep("needle", { path: "/memories" })).map((m) => m.path),
        ["/memories/user.md"]
      )
    }))

  it.effect("errors name the composite's paths; a routed workspace keeps its access rules", () =>
    Effect.gen(function*() {
      const docs = yield* Workspace.makeMemory({ files: { "/guide.md": "a a" }, defaultAccess: "read-only" })
      const workspace = yield* Workspace.composite(yield* memory(), { "/docs": docs })
      assert.deepStrictEqual(yield* reasonOf(workspace.read("/docs/missing.md")), ["NotFound", "/docs/missing.md"])
      assert.deepStrictEqual(yield* reasonOf(workspace.write("/docs/new.md", "x")), ["ReadOnly", "/docs/new.md"])
      assert.deepStrictEqual(yield* reasonOf(workspace.read("/missing.md")), ["NotFound", "/missing.md"])
      assert.deepStrictEqual(yield* reasonOf(workspace.ls("/docs/../..")), ["OutsideRoot", "/docs/../.."])
      const notUnique = yield* Effect.flip(
        Workspace.composite(yield* memory(), { "/d": yield* memory({ "/f": "a a" }) }).pipe(
          Either.getOrThrow,
          (w) => w.edit("/d/f", "a", "b", false)
        )
      )
      assert.deepStrictEqual([notUnique.reason, notUnique.path], ["EditNotUnique", "/d/f"])
    }))

  it.effect("the composite's rules reach its routes: a read-only rule over a mounted prefix refuses writes there", () =>
    Effect.gen(function*() {
      const variants: ReadonlyArray<Workspace.AccessOptions> = [
        { rules: [{ pattern: "/memories", access: "read-only" }] },
        { rules: [{ pattern: "memories/", access: "read-only" }] },
        { rules: [{ pattern: "/memories/**", access: "read-only" }] },
        { rules: [{ pattern: "/memories/*.md", access: "read-only" }] },
        { rules: [{ pattern: "**/*.md", access: "read-only" }] },
        { rules: [{ pattern: "/notes", access: "read-write" }], defaultAccess: "read-only" }
      ]
      for (const options of variants) {
        const memories = yield* memory({ "/user.md": "a" })
        const workspace = yield* Workspace.composite(yield* memory(), { "/memories": memories }, options)
        const label = JSON.stringify(options)
        assert.deepStrictEqual(yield* reasonOf(workspace.write("/memories/x.md", "x")), ["ReadOnly", "/memories/x.md"])
        assert.deepStrictEqual(
          yield* reasonOf(workspace.edit("/memories/user.md", "a", "b", false)),
          ["ReadOnly", "/memories/user.md"],
          label
        )
        assert.deepStrictEqual(
          yield* reasonOf(workspace.write("/notes/../memories/y.md", "x")),
          ["ReadOnly", "/memories/y.md"],
          label
        )
        assert.deepStrictEqual(yield* memories.glob("**"), ["/user.md"], label)
        assert.strictEqual(yield* memories.read("/user.md"), "a", label)
        // what the rules leave writable is written
        yield* workspace.write("/notes/ok.txt", "ok")
        assert.strictEqual(yield* workspace.read("/notes/ok.txt"), "ok")
      }
    }))

  it.effect("a route that is not a directory inside the root, or routed twice, is refused", () =>
    Effect.gen(function*() {
      const ws = yield* memory()
      const optionOf = (routes: Record<string, Workspace.Service>) =>
        Either.match(Workspace.composite(ws, routes), { onLeft: (e) => e.option, onRight: () => "accepted" })
      assert.strictEqual(optionOf({ "/": ws }), "routes[\"/\"]")
      assert.strictEqual(optionOf({ "/a/../..": ws }), "routes[\"/a/../..\"]")
      assert.strictEqual(optionOf({ "/m": ws, "/m/": ws }), "routes[\"/m/\"]")
      assert.strictEqual(optionOf({ "m": ws }), "accepted")
    }))

  it.effect.prop(
    "every write reads back through the composite and lands in the workspace of its longest prefix only",
    {
      writes: FastCheck.array(
        FastCheck.tuple(
          FastCheck.array(FastCheck.constantFrom("a", "b", "c", "..", "."), { minLength: 1, maxLength: 4 }),
          FastCheck.string({ maxLength: 8 })
        ),
        { maxLength: 12 }
      )
    },
    ({ writes }) =>
      Effect.gen(function*() {
        const stores = { "/": yield* memory(), "/a": yield* memory(), "/a/b": yield* memory(), "/c": yield* memory() }
        const { "/": fallback, ...routes } = stores
        const workspace = yield* Workspace.composite(fallback, routes)
        const expected = new Map<string, string>()
        for (const [segments, content] of writes) {
          const path = `/${segments.join("/")}/f.txt`
          const written = yield* Effect.either(workspace.write(path, content))
          // .. above the root is refused by the router; any other path is inside one workspace
          const normalized = path.split("/").reduce<Array<string> | undefined>((out, s) =>
            out === undefined ? undefined : s === ".." ?
              (out.length === 0 ? undefined : out.slice(0, -1)) :
              s === "." || s === ""
              ? out
              : [...out, s], [])
          if (normalized === undefined) {
            assert.isTrue(Either.isLeft(written) && written.left.reason === "OutsideRoot")
            continue
          }
          assert.isTrue(Either.isRight(written))
          expected.set(`/${normalized.join("/")}`, content)
        }
        for (const [path, content] of expected) {
          assert.strictEqual(yield* workspace.read(path), content)
          const owner = ["/a/b", "/a", "/c"].find((prefix) =>
            path.startsWith(`${prefix}/`)
          ) ?? "/"
          // the workspaces whose prefix holds the path: only the owner has it
          for (const [prefix, store] of Object.entries(stores)) {
            if (prefix !== "/" && !path.startsWith(`${prefix}/`)) continue
            const inner = prefix === "/" ? path : path.slice(prefix.length)
            const found = Either.isRight(yield* Effect.either(store.read(inner)))
            assert.strictEqual(found, prefix === owner, `${path} in ${prefix}`)
          }
        }
        assert.deepStrictEqual(yield* workspace.glob("**"), [...expected.keys()].sort())
      }),
    { fastCheck: { numRuns: 60 } }
  )
})

describe("Workspace.composite over a real directory", () => {
  const setup = Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const root = yield* fs.makeTempDirectoryScoped()
    const outside = yield* fs.makeTempDirectoryScoped()
    yield* fs.writeFileString(`${outside}/secret.txt`, "secret")
    yield* fs.symlink(outside, `${root}/escape`)
    const directory = yield* Workspace.makeDirectory({ root })
    const fallback = yield* memory({ "/secret.txt": "the fallback's" })
    const workspace = yield* Workspace.composite(fallback, { "/memories": directory })
    return { fs, root, outside, workspace }
  })

  it.scoped("escape attempts through the router stay inside the root or fail", () =>
    Effect.gen(function*() {
      const { fs, outside, root, workspace } = yield* setup
      // .. above the composite's root
      assert.deepStrictEqual(yield* reasonOf(workspace.read("/memories/../../secret.txt")), [
        "OutsideRoot",
        "/memories/../../secret.txt"
      ])
      // .. out of the prefix lands in the fallback, never next to the directory
      assert.strictEqual(yield* workspace.read("/memories/../secret.txt"), "the fallback's")
      yield* workspace.write("/memories/../planted.txt", "x")
      assert.deepStrictEqual((yield* fs.readDirectory(root)).sort(), ["escape"])
      // a link in the directory that leads out of it
      assert.deepStrictEqual(yield* reasonOf(workspace.read("/memories/escape/secret.txt")), [
        "OutsideRoot",
        "/memories/escape/secret.txt"
      ])
      assert.deepStrictEqual(yield* reasonOf(workspace.write("/memories/escape/new.txt", "x")), [
        "OutsideRoot",
        "/memories/escape/new.txt"
      ])
      assert.deepStrictEqual(yield* fs.readDirectory(outside), ["secret.txt"])
      // a file written under the prefix is a real file under the root
      yield* workspace.write("/memories/user.md", "short answers")
      assert.strictEqual(yield* fs.readFileString(`${root}/user.md`), "short answers")
      assert.deepStrictEqual(yield* workspace.glob("**/*.md"), ["/memories/user.md"])
    }).pipe(Effect.provide(NodeContext.layer)))
})

describe("Filesystem with routes", () => {
  const toolResults = (messages: ReadonlyArray<Prompt.Message>) =>
    messages.flatMap((m) => m.role === "tool" ? m.content : [])
  const call = (name: string, params: unknown, id: string) => ScriptedModel.toolCalls([{ name, params, id }])

  it.effect("files under a route live in its workspace, shared by threads; the rest stay in the thread's state", () =>
    Effect.gen(function*() {
      const memories = yield* memory()
      const model = yield* ScriptedModel.make([
        call("write_file", { file_path: "/memories/user.md", content: "Prefers short answers." }, "w1"),
        call("write_file", { file_path: "/draft.md", content: "draft" }, "w2"),
        ScriptedModel.text("noted"),
        call("read_file", { file_path: "/memories/user.md" }, "r1"),
        call("ls", { path: "/" }, "l1"),
        ScriptedModel.text("done")
      ])
      const agent = yield* Agent.make({ middleware: [Filesystem.middleware({ routes: { "/memories": memories } })] })
        .pipe(Effect.provideService(LanguageModel.LanguageModel, model.model))
      const first = yield* agent.run("remember", { threadId: "one" })
      assert.deepStrictEqual(first.state.files, { "/draft.md": "draft" })
      assert.strictEqual(yield* memories.read("/user.md"), "Prefers short answers.")
      const second = yield* agent.run("recall", { threadId: "two" })
      const results = toolResults(second.state.messages)
      assert.deepStrictEqual(results.map((r) => [r.id, r.isFailure]), [["r1", false], ["l1", false]])
      assert.include(results[0]!.result as string, "Prefers short answers.")
      // another thread: its own (empty) state, the shared memories
      assert.strictEqual(results[1]!.result, "/memories/")
    }))

  it.effect("bad routes make Agent.make fail with InvalidOptions naming the route", () =>
    Effect.gen(function*() {
      const error = yield* Effect.flip(
        Agent.make({ middleware: [Filesystem.middleware({ routes: { "/": yield* memory() } })] })
      )
      assert.deepStrictEqual(
        [error._tag, error._tag === "InvalidOptions" && error.module, error._tag === "InvalidOptions" && error.option],
        ["InvalidOptions", "Filesystem", "routes[\"/\"]"]
      )
      const notAWorkspace = yield* Effect.flip(
        Agent.make({ middleware: [Filesystem.middleware({ routes: { "/m": {} as any } })] })
      )
      assert.strictEqual(notAWorkspace._tag, "InvalidOptions")
    }).pipe(Effect.provide(ScriptedModel.layer([]))))

  it.scoped("the composite's rules hold through a link inside a directory, fallback or routed, for writes, edits and new directories", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const roots = { fallback: yield* fs.makeTempDirectoryScoped(), routed: yield* fs.makeTempDirectoryScoped() }
      for (const root of Object.values(roots)) {
        yield* fs.makeDirectory(`${root}/docs`)
        yield* fs.writeFileString(`${root}/docs/a.md`, "doc")
        yield* fs.symlink("docs", `${root}/alias`)
      }
      const workspace = yield* Workspace.composite(
        yield* Workspace.makeDirectory({ root: roots.fallback }),
        { "/m": yield* Workspace.makeDirectory({ root: roots.routed }) },
        { rules: [{ pattern: "/docs", access: "read-only" }, { pattern: "/m/docs/**", access: "read-only" }] }
      )
      for (const at of ["", "/m"]) {
        assert.deepStrictEqual(yield* reasonOf(workspace.write(`${at}/alias/new.md`, "x")), [
          "ReadOnly",
          `${at}/alias/new.md`
        ])
        assert.strictEqual((yield* reasonOf(workspace.write(`${at}/alias/sub/new.md`, "x")))[0], "ReadOnly")
        assert.strictEqual(
          (yield* reasonOf(workspace.edit(`${at}/alias/a.md`, "doc", "changed", false)))[0],
          "ReadOnly"
        )
      }
      for (const root of Object.values(roots)) {
        assert.deepStrictEqual(yield* fs.readDirectory(`${root}/docs`), ["a.md"])
        assert.strictEqual(yield* fs.readFileString(`${root}/docs/a.md`), "doc")
      }
      // elsewhere the links still work
      yield* workspace.write("/m/alias-free.md", "ok")
    }).pipe(Effect.provide(NodeContext.layer)))
})
