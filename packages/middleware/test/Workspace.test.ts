import { FileSystem } from "@effect/platform"
import { NodeContext } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Either, Exit, FastCheck, Fiber, Option, Schema } from "effect"
import * as NodeFs from "node:fs"
import * as HostJail from "../src/internal/hostJail.js"
import * as Paths from "../src/internal/workspacePaths.js"
import * as Workspace from "../src/Workspace.js"

/** Whether `path` (under `base`) matches `pattern` (relative to `base`, or absolute). */
const matchesGlob = (pattern: string, base: string, path: string): boolean =>
  Effect.runSync(Paths.filterMatching(pattern, base, [path])).length === 1

const segment = FastCheck.constantFrom("a", "b", "c.md", "..", ".", "")
const virtualPath = FastCheck.array(segment, { maxLength: 8 }).map((segments) => segments.join("/"))

/** The depth a path reaches at its lowest point: negative when `..` climbs above the root. */
const lowest = (path: string): number => {
  let depth = 0
  let min = 0
  for (const s of path.split("/")) {
    if (s === "..") depth--
    else if (s !== "" && s !== ".") depth++
    min = Math.min(min, depth)
  }
  return min
}

describe("Workspace paths", () => {
  it.prop("a normalized path is rooted, has no . or .. segment, and normalizes to itself", [virtualPath], ([path]) => {
    const normalized = Paths.normalize(path)
    if (lowest(path) < 0) return normalized === undefined
    assert.isDefined(normalized)
    assert.isTrue(normalized!.startsWith("/"))
    assert.isFalse(normalized!.split("/").some((s) => s === "." || s === ".."))
    assert.strictEqual(Paths.normalize(normalized!), normalized)
    return true
  })

  it("globs: * stays within a name, ** crosses directories, {a,b} is either", () => {
    assert.isTrue(matchesGlob("*.md", "/", "/a.md"))
    assert.isFalse(matchesGlob("*.md", "/", "/docs/a.md"))
    assert.isTrue(matchesGlob("**/*.md", "/", "/a.md"))
    assert.isTrue(matchesGlob("**/*.md", "/", "/docs/deep/a.md"))
    assert.isTrue(matchesGlob("*.{ts,md}", "/src", "/src/a.ts"))
    assert.isFalse(matchesGlob("*.{ts,md}", "/src", "/src/a.js"))
    assert.isTrue(matchesGlob("/src/?.ts", "/", "/src/a.ts"))
    assert.isTrue(Paths.matchesRule("/docs", "/docs/a/b.md"))
    assert.isFalse(Paths.matchesRule("/docs", "/docsx/a.md"))
    assert.isTrue(Paths.matchesRule("**/*.lock", "/deep/x/yarn.lock"))
  })

  it("a glob the model got wrong matches as text instead of failing; repeated ** stays linear", () => {
    // "[z-a]" is no valid class: a RegExp of it would throw, and the run with it
    assert.isTrue(matchesGlob("[z-a].txt", "/", "/[z-a].txt"))
    assert.isFalse(matchesGlob("[z-a].txt", "/", "/b.txt"))
    assert.isTrue(matchesGlob("[a-c].txt", "/", "/b.txt"))
    const deep = `/${Array.from({ length: 40 }, () => "a").join("/")}/b`
    assert.isTrue(matchesGlob(`${"**/".repeat(20)}b`, "/", deep))
    assert.isFalse(matchesGlob(`${"**/".repeat(20)}c`, "/", deep))
  })
})

describe("Workspace in memory", () => {
  it.effect.prop(
    "a write reads back byte-exact",
    [FastCheck.string({ unit: "grapheme", maxLength: 300 }), virtualPath.filter((p) => Paths.normalize(p) !== "/")],
    ([content, path]) =>
      Effect.gen(function*() {
        const workspace = yield* Workspace.makeMemory()
        const written = yield* Effect.either(workspace.write(path, content))
        if (Paths.normalize(path) === undefined) {
          assert.isTrue(written._tag === "Left" && written.left.reason === "OutsideRoot")
          return
        }
        assert.strictEqual(yield* workspace.read(path), content)
      })
  )

  it.effect.prop(
    "a read-only prefix rule refuses every write under it and no write elsewhere",
    [FastCheck.array(FastCheck.constantFrom("docs", "src", "a", "b.md"), { minLength: 1, maxLength: 4 })],
    ([segments]) =>
      Effect.gen(function*() {
        const workspace = yield* Workspace.makeMemory({ rules: [{ pattern: "/docs", access: "read-only" }] })
        const path = `/${segments.join("/")}`
        const written = yield* Effect.either(workspace.write(path, "x"))
        if (segments[0] === "docs") assert.isTrue(written._tag === "Left" && written.left.reason === "ReadOnly")
        else assert.strictEqual(written._tag, "Right")
      })
  )

  it.effect("ls lists the direct children, directories marked; glob and grep search by path and content", () =>
    Effect.gen(function*() {
      const workspace = yield* Workspace.makeMemory({
        files: { "/README.md": "# Title\nneedle here", "/docs/a.md": "no", "/docs/deep/b.md": "a needle\nand needle" }
      })
      assert.deepStrictEqual(yield* workspace.ls("/"), [
        { path: "/README.md", isDirectory: false, size: 19 },
        { path: "/docs", isDirectory: true, size: 0 }
      ])
      assert.deepStrictEqual(yield* workspace.glob("**/*.md", "/docs"), ["/docs/a.md", "/docs/deep/b.md"])
      assert.deepStrictEqual(yield* workspace.grep("needle"), [
        { path: "/README.md", line: 2, text: "needle here" },
        { path: "/docs/deep/b.md", line: 1, text: "a needle" },
        { path: "/docs/deep/b.md", line: 2, text: "and needle" }
      ])
      assert.deepStrictEqual(yield* workspace.grep("needle", { path: "/docs" }), [
        { path: "/docs/deep/b.md", line: 1, text: "a needle" },
        { path: "/docs/deep/b.md", line: 2, text: "and needle" }
      ])
      assert.strictEqual((yield* Effect.flip(workspace.ls("/nowhere"))).reason, "NotFound")
      assert.strictEqual((yield* Effect.flip(workspace.read("/docs"))).reason, "NotFound")
    }))

  it("replaceIn: a unique string, every occurrence with replaceAll, else a typed refusal", () => {
    assert.deepStrictEqual(Workspace.replaceIn("/f", "a-b-a", "b", "c", false), { content: "a-c-a", occurrences: 1 })
    assert.deepStrictEqual(Workspace.replaceIn("/f", "a-b-a", "a", "c", true), { content: "c-b-c", occurrences: 2 })
    const notUnique = Workspace.replaceIn("/f", "a-b-a", "a", "c", false)
    assert.isTrue(
      notUnique instanceof Workspace.WorkspaceError && notUnique.reason === "EditNotUnique" &&
        notUnique.occurrences === 2
    )
    const notFound = Workspace.replaceIn("/f", "a", "z", "c", false)
    assert.isTrue(notFound instanceof Workspace.WorkspaceError && notFound.reason === "EditStringNotFound")
    const empty = Workspace.replaceIn("/f", "a", "", "c", true)
    assert.isTrue(empty instanceof Workspace.WorkspaceError && empty.reason === "EditStringEmpty")
  })
})

describe("WorkspaceError: one class, the reason says what was wrong", () => {
  it.effect("every refusal is a WorkspaceError whose reason names it and whose message is the one the model reads", () =>
    Effect.gen(function*() {
      const inner = yield* Workspace.makeMemory({ files: { "/f.txt": "a a", "/docs/x.md": "x" } })
      const workspace = yield* Workspace.composite(
        yield* Workspace.makeMemory({ files: { "/file": "f" } }),
        { "/m": inner },
        { rules: [{ pattern: "/m/docs", access: "read-only" }] }
      )
      const refusals: ReadonlyArray<readonly [Effect.Effect<unknown, Workspace.WorkspaceError>, string, string]> = [
        [workspace.read("/../x"), "OutsideRoot", `The path "/../x" leads outside the workspace`],
        [workspace.write("/m/docs/x.md", "y"), "ReadOnly", `The path "/m/docs/x.md" is read-only`],
        [workspace.read("/m/none.txt"), "NotFound", `No file or directory at "/m/none.txt"`],
        [
          workspace.edit("/m/f.txt", "", "b", false),
          "EditStringEmpty",
          `The string to replace in "/m/f.txt" is empty; give the exact text to replace`
        ],
        [
          workspace.edit("/m/f.txt", "z", "b", false),
          "EditStringNotFound",
          `The string to replace was not found in "/m/f.txt"; read the file and copy the text exactly`
        ],
        [
          workspace.edit("/m/f.txt", "a", "b", false),
          "EditNotUnique",
          `The string to replace occurs 2 times in "/m/f.txt"; set replace_all to replace every occurrence, ` +
          "or give a longer string that occurs once"
        ],
        [
          workspace.write("/m/f.txt", "\uD800"),
          "NotUtf8",
          `"/m/f.txt" is not UTF-8 text; the file tools read and change only text, and left it untouched`
        ],
        [
          workspace.glob("*".repeat(Workspace.maxGlobLength + 1), "/m"),
          "GlobTooLong",
          `The glob pattern is ${
            Workspace.maxGlobLength + 1
          } characters long; give one of at most ${Workspace.maxGlobLength}`
        ],
        [workspace.write("/file/under", "x"), "Io", `Could not access "/file/under": a directory above it is a file`]
      ]
      for (const [refused, reason, message] of refusals) {
        const error = yield* Effect.flip(refused)
        assert.instanceOf(error, Workspace.WorkspaceError)
        assert.deepStrictEqual([error._tag, error.reason, error.message], ["WorkspaceError", reason, message])
        // the error is data: it encodes and decodes to an equal error (a durable journal or a log keeps it whole)
        const decoded = Schema.decodeUnknownSync(Workspace.WorkspaceError)(
          Schema.encodeSync(Workspace.WorkspaceError)(error)
        )
        assert.deepStrictEqual([decoded.reason, decoded.path, decoded.message], [error.reason, error.path, message])
      }
      // a refusal of a routed workspace names the composite's path and keeps its details
      const notUnique = yield* Effect.flip(workspace.edit("/m/f.txt", "a", "b", false))
      assert.deepStrictEqual([notUnique.path, notUnique.occurrences], ["/m/f.txt", 2])
      assert.deepStrictEqual(Schema.decodeUnknownSync(Workspace.WorkspaceErrorReason)("NotFound"), "NotFound")
      assert.throws(() => Schema.decodeUnknownSync(Workspace.WorkspaceErrorReason)("FileNotFound"))
    }))
})

// each with the jail's two strategies: by descriptor (/proc/self/fd), and the portable one of macOS and Windows
for (const useProcFd of [true, false]) {
  describe(`Workspace on a directory${useProcFd ? "" : ", the portable jail"}`, () => {
    const inStrategy = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
      effect.pipe(Effect.provideService(HostJail.UseProcFd, useProcFd), Effect.provide(NodeContext.layer))

    const setup = Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const root = yield* fs.makeTempDirectoryScoped()
      const outside = yield* fs.makeTempDirectoryScoped()
      yield* fs.writeFileString(`${outside}/secret.txt`, "secret")
      yield* fs.symlink(outside, `${root}/linkdir`)
      yield* fs.symlink(`${outside}/secret.txt`, `${root}/linkfile`)
      yield* fs.makeDirectory(`${root}/docs`)
      yield* fs.writeFileString(`${root}/docs/guide.md`, "guide\nneedle")
      yield* fs.symlink(`${root}/docs/guide.md`, `${root}/inner-link`)
      const workspace = yield* Workspace.makeDirectory({ root, rules: [{ pattern: "/docs", access: "read-only" }] })
      return { fs, root, outside, workspace }
    })

    it.scoped("rejects .. above the root and symbolic links out of it, for reads and writes", () =>
      Effect.gen(function*() {
        const { fs, outside, root, workspace } = yield* setup
        const reasonOf = <A>(effect: Effect.Effect<A, Workspace.WorkspaceError>) =>
          Effect.map(Effect.flip(effect), (error) => error.reason)
        assert.strictEqual(yield* reasonOf(workspace.read("/../secret.txt")), "OutsideRoot")
        assert.strictEqual(yield* reasonOf(workspace.write("/docs/../../x.txt", "x")), "OutsideRoot")
        assert.strictEqual(yield* reasonOf(workspace.read("/linkdir/secret.txt")), "OutsideRoot")
        assert.strictEqual(yield* reasonOf(workspace.read("/linkfile")), "OutsideRoot")
        assert.strictEqual(yield* reasonOf(workspace.write("/linkfile", "overwritten")), "OutsideRoot")
        assert.strictEqual(yield* reasonOf(workspace.write("/linkdir/planted.txt", "x")), "OutsideRoot")
        assert.strictEqual(yield* reasonOf(workspace.write("/linkdir/new/deep.txt", "x")), "OutsideRoot")
        assert.strictEqual(yield* reasonOf(workspace.ls("/linkdir")), "OutsideRoot")
        assert.strictEqual(yield* fs.readFileString(`${outside}/secret.txt`), "secret")
        // a link to a file that does not exist yet, outside the root: writing through it would create that file
        yield* fs.symlink(`${outside}/created.txt`, `${root}/dangling`)
        assert.strictEqual(yield* reasonOf(workspace.write("/dangling", "planted")), "OutsideRoot")
        assert.strictEqual(yield* reasonOf(workspace.edit("/dangling", "a", "b", false)), "OutsideRoot")
        assert.deepStrictEqual(yield* fs.readDirectory(outside), ["secret.txt"])
        // a link that stays inside the root is fine
        assert.strictEqual(yield* workspace.read("/inner-link"), "guide\nneedle")
      }).pipe(inStrategy))

    it.scoped("writes, edits and lists real files; a read-only rule refuses writes and edits", () =>
      Effect.gen(function*() {
        const { fs, root, workspace } = yield* setup
        yield* workspace.write("/src/deep/a.ts", "const a = 1\n")
        assert.strictEqual(yield* fs.readFileString(`${root}/src/deep/a.ts`), "const a = 1\n")
        assert.strictEqual(yield* workspace.edit("/src/deep/a.ts", "1", "2", false), 1)
        assert.strictEqual(yield* workspace.read("/src/deep/a.ts"), "const a = 2\n")
        assert.strictEqual((yield* Effect.flip(workspace.write("/docs/new.md", "x"))).reason, "ReadOnly")
        assert.strictEqual(
          (yield* Effect.flip(workspace.edit("/docs/guide.md", "guide", "x", false))).reason,
          "ReadOnly"
        )
        assert.strictEqual(yield* fs.readFileString(`${root}/docs/guide.md`), "guide\nneedle")
        // the links out of the root are not listed: listing shows what reading accepts
        assert.deepStrictEqual((yield* workspace.ls("/")).map((e) => `${e.path}${e.isDirectory ? "/" : ""}`), [
          "/docs/",
          "/inner-link",
          "/src/"
        ])
        assert.deepStrictEqual(yield* workspace.glob("**/*.ts"), ["/src/deep/a.ts"])
        // grep skips what it may not read (the links out of the root) instead of failing
        assert.deepStrictEqual(yield* workspace.grep("needle"), [
          { path: "/docs/guide.md", line: 2, text: "needle" },
          { path: "/inner-link", line: 2, text: "needle" }
        ])
      }).pipe(inStrategy))

    it.effect.prop(
      "a write reads back byte-exact from disk",
      [FastCheck.string({ unit: "grapheme", maxLength: 200 })],
      ([content]) =>
        Effect.gen(function*() {
          const fs = yield* FileSystem.FileSystem
          const root = yield* fs.makeTempDirectoryScoped()
          const workspace = yield* Workspace.makeDirectory({ root })
          yield* workspace.write("/f.txt", content)
          assert.strictEqual(yield* workspace.read("/f.txt"), content)
        }).pipe(Effect.scoped, inStrategy),
      { fastCheck: { numRuns: 20 } }
    )
  })
}

describe("Workspace: the memory and directory stores answer alike", () => {
  it.scoped("a write over a directory, under a file or to the root, and text UTF-8 cannot encode, fail alike; sizes are UTF-8 bytes", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const root = yield* fs.makeTempDirectoryScoped()
      const stores = {
        memory: yield* Workspace.makeMemory(),
        directory: yield* Workspace.makeDirectory({ root }),
        composite: yield* Workspace.composite(yield* Workspace.makeMemory(), {
          "/mnt": yield* Workspace.makeDirectory({ root: yield* fs.makeTempDirectoryScoped() })
        })
      }
      const answers: Record<string, Array<string>> = {}
      for (const [name, workspace] of Object.entries(stores)) {
        // the composite's paths are under its mounted directory
        const at = (path: string) => name === "composite" ? `/mnt${path === "/" ? "" : path}` : path
        yield* workspace.write(at("/dir/file.txt"), "text")
        const outcome = (effect: Effect.Effect<unknown, Workspace.WorkspaceError>) =>
          Effect.map(
            Effect.exit(effect),
            (exit) =>
              Exit.isSuccess(exit) ? "ok" : Exit.isFailure(exit) && exit.cause._tag === "Fail"
                ? `${exit.cause.error.reason}${exit.cause.error.reason === "Io" ? `: ${exit.cause.error.detail}` : ""}`
                : "defect"
          )
        answers[name] = [
          yield* outcome(workspace.write(at("/"), "x")),
          yield* outcome(workspace.write(at("/dir"), "x")),
          yield* outcome(workspace.write(at("/dir/"), "x")),
          yield* outcome(workspace.write(at("/dir/file.txt/under.txt"), "x")),
          yield* outcome(workspace.write(at("/dir/file.txt/a/b.txt"), "x")),
          yield* outcome(workspace.write(at("/dir/half.txt"), "lone \uD800")),
          yield* outcome(workspace.edit(at("/dir/file.txt"), "text", "\uDFFF", false)),
          yield* outcome(workspace.read(at("/dir"))),
          yield* outcome(workspace.read(at("/dir/file.txt/under.txt")))
        ]
        assert.deepStrictEqual(yield* workspace.glob("**", at("/")), [at("/dir/file.txt")], name)
        assert.strictEqual(yield* workspace.read(at("/dir/file.txt")), "text", name)
        assert.deepStrictEqual((yield* workspace.ls(at("/"))).map((entry) => entry.path), [at("/dir")], name)
        // sizes are of the UTF-8 text, as on a disk: é is 2 bytes, 😀 4
        yield* workspace.write(at("/dir/sized.txt"), "\u00e9\u{1F600}a")
        const sized = (yield* workspace.ls(at("/dir"))).find((entry) => entry.path === at("/dir/sized.txt"))
        assert.strictEqual(sized?.size, 7, name)
        assert.strictEqual((yield* workspace.ls(at("/dir/sized.txt")))[0]?.size, 7, name)
      }
      assert.deepStrictEqual(answers.memory, [
        "Io: it is a directory",
        "Io: it is a directory",
        "Io: it is a directory",
        "Io: a directory above it is a file",
        "Io: a directory above it is a file",
        "NotUtf8",
        "NotUtf8",
        "NotFound",
        "NotFound"
      ])
      assert.deepStrictEqual(answers.directory, answers.memory)
      assert.deepStrictEqual(answers.composite, answers.memory)
    }).pipe(Effect.provide(NodeContext.layer)))
  it.scoped("a path with a lone surrogate is refused by every store, as one with a NUL: no two names are one file", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const root = yield* fs.makeTempDirectoryScoped()
      const stores = [yield* Workspace.makeMemory(), yield* Workspace.makeDirectory({ root })]
      for (const workspace of stores) {
        for (const path of ["/a\uD800.md", "/a\uDC00.md", "/dir\uDBFF/b.md", "/nul\0.md"]) {
          const refusal = yield* Effect.flip(workspace.write(path, "x"))
          assert.strictEqual(refusal.reason, "OutsideRoot", JSON.stringify(path))
          assert.strictEqual((yield* Effect.flip(workspace.read(path))).reason, "OutsideRoot")
        }
        // a whole pair is a character like any other
        yield* workspace.write("/smile\u{1F600}.md", "ok")
        assert.deepStrictEqual(yield* workspace.glob("**"), ["/smile\u{1F600}.md"])
      }
      assert.deepStrictEqual(NodeFs.readdirSync(root), ["smile\u{1F600}.md"])
    }).pipe(Effect.provide(NodeContext.layer)))
})

describe("Workspace rules: the twins of a read-only path", () => {
  // names macOS and Windows take for one file: case, Unicode normalisation, ignorable code points, trailing dots and
  // spaces, an NTFS stream
  const twins = [
    "/docs/café/a.md",
    "/DOCS/CAFÉ/a.md",
    "/Docs/Cafe\u0301/a.md",
    "/Docs/\u200CCafé/a.md",
    "/Docs./Café/a.md",
    "/Docs /Café/a.md",
    "/Docs/Café::$DATA",
    "/Docs/Café/a.md:stream",
    "/keys/prod.ENV",
    // letters whose capital is another's: a long s is an S, a dotless i an I (NTFS's capitals, Unicode's folding)
    "/Doc\u017f/Café/a.md",
    "/DOC\u017f/CAFÉ/a.md",
    "/l\u0131b/x.js",
    "/L\u0131B/x.js"
  ]
  const rules: ReadonlyArray<Workspace.Rule> = [
    { pattern: "/Docs/Café", access: "read-only" },
    { pattern: "**/*.env", access: "read-only" },
    { pattern: "/lib", access: "read-only" }
  ]

  it.scoped("a read-only rule covers every twin of its path, in memory, on a directory and in a composite", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const stores = {
        memory: yield* Workspace.makeMemory({ rules }),
        directory: yield* Workspace.makeDirectory({ root: yield* fs.makeTempDirectoryScoped(), rules }),
        composite: yield* Workspace.composite(yield* Workspace.makeMemory(), {
          "/Docs": yield* Workspace.makeMemory()
        }, { rules })
      }
      for (const [name, workspace] of Object.entries(stores)) {
        for (const path of twins) {
          const refusal = yield* Effect.flip(workspace.write(path, "x"))
          assert.strictEqual(refusal.reason, "ReadOnly", `${name}: ${JSON.stringify(path)}`)
        }
        // a different name is not a twin
        yield* workspace.write("/docs/cafe/a.md", "x")
        yield* workspace.write("/keys/prod.env.example", "x")
        yield* workspace.write("/li/b.js", "x")
      }
    }).pipe(Effect.provide(NodeContext.layer)))

  // letters with more than one small or capital form, as the file systems that ignore case compare them
  const letter = FastCheck.constantFrom(
    ..."s S \u017f i I \u0131 \u0130 k K \u212a \u00df \u1e9e \u03c3 \u03a3 \u03c2 \u00e9 e\u0301 \u00c9".split(" "),
    ..."\u01c5 \u01c4 \u0345 \u03b9 \u13f8 \u13f0 /".split(" ")
  )
  const eachLetter = (text: string, to: (letter: string) => string) => Array.from(text, to).join("")

  it.prop(
    "a path folds as its letters' capitals and small letters, each taken alone, do",
    [FastCheck.array(letter, { maxLength: 12 }).map((letters) => `/${letters.join("")}`)],
    ([path]) => {
      const folded = Paths.fold(path)
      const upper = eachLetter(path, (c) => [...c.toUpperCase()].length === 1 ? c.toUpperCase() : c)
      const lower = eachLetter(path, (c) => [...c.toLowerCase()].length === 1 ? c.toLowerCase() : c)
      assert.strictEqual(Paths.fold(upper), folded, JSON.stringify(upper))
      assert.strictEqual(Paths.fold(lower), folded, JSON.stringify(lower))
    }
  )

  it.scoped("a rule's brace alternatives that begin or end with a slash hold in memory, on a directory and in a composite", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      for (
        const pattern of [
          "{/docs/**,/vendor/**}",
          "{/docs,/vendor}/**",
          "{/docs/,/vendor/}**/",
          "{./docs,//vendor}/**",
          "{/a,/{docs,vendor}/{**,x}}"
        ]
      ) {
        const rules: ReadonlyArray<Workspace.Rule> = [{ pattern, access: "read-only" }]
        const stores = {
          memory: yield* Workspace.makeMemory({ rules }),
          directory: yield* Workspace.makeDirectory({ root: yield* fs.makeTempDirectoryScoped(), rules }),
          composite: yield* Workspace.composite(yield* Workspace.makeMemory(), {
            "/vendor": yield* Workspace.makeMemory()
          }, { rules })
        }
        for (const [name, workspace] of Object.entries(stores)) {
          for (const path of ["/docs/a.md", "/docs/deep/b.md", "/vendor/x/y.js"]) {
            const refusal = yield* Effect.flip(workspace.write(path, "x"))
            assert.strictEqual(refusal.reason, "ReadOnly", `${name}: ${pattern} over ${path}`)
          }
          yield* workspace.write("/other/a.md", "x")
        }
      }
    }).pipe(Effect.provide(NodeContext.layer)))

  it.scoped("a rule refused (a .. segment, too many alternatives) fails the constructors that can fail, naming it", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      for (const pattern of ["/docs/../vendor/*", "{/a,/b/..}/*", "{a,b}".repeat(9)]) {
        const rules: ReadonlyArray<Workspace.Rule> = [{ pattern: "/x", access: "read-write" }, {
          pattern,
          access: "read-only"
        }]
        const directory = yield* Effect.flip(
          Workspace.makeDirectory({ root: yield* fs.makeTempDirectoryScoped(), rules })
        )
        assert.strictEqual(directory._tag, "InvalidOptions")
        assert.include(directory.message, "rules[1].pattern")
        assert.include(directory.message, JSON.stringify(pattern))
        const composite = Workspace.composite(yield* Workspace.makeMemory(), {}, { rules })
        assert.isTrue(Either.isLeft(composite) && composite.left.message.includes("rules[1].pattern"), pattern)
        // the constructors that cannot fail hold it safely: read-only over every path, read-write over none
        const memory = yield* Workspace.makeMemory({ rules })
        yield* memory.write("/x/a.md", "x")
        assert.strictEqual((yield* Effect.flip(memory.write("/other.md", "x"))).reason, "ReadOnly", pattern)
        const writable = yield* Workspace.makeMemory({
          rules: [{ pattern, access: "read-write" }],
          defaultAccess: "read-only"
        })
        assert.strictEqual((yield* Effect.flip(writable.write("/vendor/a", "x"))).reason, "ReadOnly", pattern)
      }
    }).pipe(Effect.provide(NodeContext.layer)))

  it.effect("a glob written with backslashes matches as with slashes: a rule so written holds, glob finds", () =>
    Effect.gen(function*() {
      const workspace = yield* Workspace.makeMemory({
        files: { "/docs/a.md": "a", "/src/b.ts": "b" },
        rules: [{ pattern: "docs\\*.md", access: "read-only" }]
      })
      assert.strictEqual((yield* Effect.flip(workspace.write("/docs/a.md", "x"))).reason, "ReadOnly")
      assert.deepStrictEqual(yield* workspace.glob("src\\*.ts"), ["/src/b.ts"])
      assert.deepStrictEqual(yield* workspace.glob("**\\*.md"), ["/docs/a.md"])
    }))
})

describe("Workspace glob: linear time, bounded, interruptible", () => {
  const issuePatterns = [
    "*a".repeat(14) + "b",
    "**a".repeat(14) + "b",
    "a*".repeat(30) + "b",
    "{a,aa}".repeat(30) + "b",
    "?*".repeat(30) + "b",
    "[a]*".repeat(20) + "b"
  ]

  it.effect("patterns that backtrack a regular expression end at once over a file named with 60 a's", () =>
    Effect.gen(function*() {
      const name = `/${"a".repeat(60)}`
      const workspace = yield* Workspace.makeMemory({ files: { [name]: "aaa" } })
      for (const pattern of issuePatterns) {
        assert.deepStrictEqual(yield* workspace.glob(pattern), [], pattern)
        assert.deepStrictEqual(yield* workspace.grep("a", { glob: pattern }), [], pattern)
      }
      assert.deepStrictEqual(yield* workspace.glob("*a".repeat(14)), [name])
    }))

  it.scoped("the same patterns end over a real directory", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const root = yield* fs.makeTempDirectoryScoped()
      yield* fs.writeFileString(`${root}/${"a".repeat(60)}`, "aaa")
      const workspace = yield* Workspace.makeDirectory({ root })
      for (const pattern of issuePatterns) assert.deepStrictEqual(yield* workspace.glob(pattern), [], pattern)
    }).pipe(Effect.provide(NodeContext.layer)))

  it.effect("./ segments and doubled slashes in a pattern match as in a path: a rule so written still holds", () =>
    Effect.gen(function*() {
      for (const pattern of ["./docs/*.md", "/docs//*.md", "docs/./*.md", "/./docs/**"]) {
        const workspace = yield* Workspace.makeMemory({
          files: { "/docs/a.md": "a" },
          rules: [{ pattern, access: "read-only" }]
        })
        assert.strictEqual((yield* Effect.flip(workspace.write("/docs/a.md", "x"))).reason, "ReadOnly", pattern)
        assert.deepStrictEqual(yield* workspace.glob(pattern), ["/docs/a.md"], pattern)
        assert.deepStrictEqual((yield* workspace.grep("a", { glob: pattern })).map((m) => m.path), ["/docs/a.md"])
      }
    }))

  it.effect("a pattern longer than maxGlobLength fails with GlobTooLong, in glob, grep and a composite", () =>
    Effect.gen(function*() {
      const long = "*".repeat(Workspace.maxGlobLength + 1)
      const workspace = yield* Workspace.makeMemory({ files: { "/a.txt": "a" } })
      const composite = yield* Workspace.composite(workspace, { "/m": yield* Workspace.makeMemory() })
      const refusals: ReadonlyArray<Effect.Effect<unknown, Workspace.WorkspaceError>> = [
        workspace.glob(long),
        workspace.grep("a", { glob: long }),
        composite.glob(long),
        composite.glob(long, "/m"),
        composite.grep("a", { glob: long, path: "/m" })
      ]
      for (const refused of refusals) {
        const error = yield* Effect.flip(refused)
        assert.isTrue(error.reason === "GlobTooLong" && error.size === Workspace.maxGlobLength + 1, error.message)
      }
      assert.deepStrictEqual(yield* workspace.glob("*".repeat(Workspace.maxGlobLength)), ["/a.txt"])
    }))

  it.live(
    "a long search yields: other fibers go on meanwhile, and interrupting it ends it",
    () =>
      Effect.gen(function*() {
        const files: Record<string, string> = {}
        for (let i = 0; i < 20_000; i++) files[`/${"a".repeat(200)}${i}`] = ""
        const workspace = yield* Workspace.makeMemory({ files })
        const search = yield* Effect.fork(workspace.glob("*a".repeat(120) + "b"))
        // with a search that never yielded, this loop would not run until it ended
        let turns = 0
        while (turns < 50) {
          yield* Effect.yieldNow()
          turns++
        }
        assert.isTrue(Option.isNone(yield* Fiber.poll(search)), "the search is still running")
        const exit = yield* Fiber.interrupt(search)
        assert.isTrue(Exit.isInterrupted(exit))
      }),
    { timeout: 60_000 }
  )

  it.live(
    "one very long path is matched in pieces: it yields too, and matches as a short one would",
    () =>
      Effect.gen(function*() {
        const long = `/${"a".repeat(100_000)}`
        const workspace = yield* Workspace.makeMemory({ files: { [long]: "", "/b": "" } })
        const search = yield* Effect.fork(workspace.glob("*a".repeat(120) + "b"))
        let turns = 0
        while (turns < 20) {
          yield* Effect.yieldNow()
          turns++
        }
        assert.isTrue(Option.isNone(yield* Fiber.poll(search)), "the search is still running")
        assert.isTrue(Exit.isInterrupted(yield* Fiber.interrupt(search)))
        assert.deepStrictEqual(yield* workspace.glob("{*a,b}"), [long, "/b"])
      }),
    { timeout: 60_000 }
  )
})

describe("Workspace: a path longer than maxPathLength", () => {
  it.effect("fails every operation with PathTooLong at once, also a quarter megabyte of stacked combining marks", () =>
    Effect.gen(function*() {
      const workspace = yield* Workspace.makeMemory({ files: { "/a.txt": "a" } })
      // normalizing such a path takes time that grows with the square of its length: minutes at this size
      const long = "/a" + "\u0301\u0316\u0300\u0317".repeat(65_536)
      const started = Date.now()
      const refusals = [
        workspace.read(long),
        workspace.write(long, "x"),
        workspace.edit(long, "a", "b", false),
        workspace.ls(long),
        workspace.glob("*", long),
        workspace.grep("a", { path: long }),
        ...(workspace.remove === undefined ? [] : [workspace.remove(long)])
      ]
      for (const refused of refusals) {
        const error = yield* Effect.flip(refused)
        assert.strictEqual(error.reason, "PathTooLong", error.message)
        assert.strictEqual(error.size, long.length)
        assert.strictEqual(error.max, Workspace.maxPathLength)
        assert.isBelow(error.message.length, 300)
      }
      assert.isBelow(Date.now() - started, 5_000)
      // at the limit, a path is read as any other
      const atLimit = "/" + "b".repeat(Workspace.maxPathLength - 1)
      yield* workspace.write(atLimit, "ok")
      assert.strictEqual(yield* workspace.read(atLimit), "ok")
    }))
})
