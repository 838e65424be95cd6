import type { Prompt } from "@effect/ai"
import { LanguageModel } from "@effect/ai"
import { FileSystem } from "@effect/platform"
import { NodeContext } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import { Agent, Checkpointer } from "@stepwise-agent/core"
import { ScriptedModel } from "@stepwise-agent/testing"
import { Deferred, Effect, Fiber, Layer, Option } from "effect"
import * as Filesystem from "../src/Filesystem.js"
import * as Workspace from "../src/Workspace.js"

const call = (name: string, params: unknown, id: string) => ScriptedModel.toolCalls([{ name, params, id }])

const toolResults = (messages: ReadonlyArray<Prompt.Message>): Array<Prompt.ToolResultPart> =>
  messages.flatMap((message) =>
    message.role === "tool"
      ? message.content.filter((part): part is Prompt.ToolResultPart => part.type === "tool-result")
      : []
  )

const resultOf = (messages: ReadonlyArray<Prompt.Message>, id: string) => {
  const part = toolResults(messages).find((p) => p.id === id)
  assert.isDefined(part, `no result for ${id}`)
  return part!
}

const setup = (script: ReadonlyArray<ScriptedModel.Turn>, options?: Filesystem.StateOptions) =>
  Effect.gen(function*() {
    const model = yield* ScriptedModel.make(script)
    const agent = yield* Agent.make({ middleware: [Filesystem.middleware(options)] }).pipe(
      Effect.provideService(LanguageModel.LanguageModel, model.model)
    )
    return { agent, requests: model.recorder.requests }
  })

const lines = Array.from({ length: 10 }, (_, i) => i === 6 ? "line 7 has the needle" : `line ${i + 1}`).join("\n")

describe("Filesystem (files in the agent state)", () => {
  it.effect("an agent writes a file, reads it back paged and greps it", () =>
    Effect.gen(function*() {
      const { agent, requests } = yield* setup([
        call("write_file", { file_path: "/notes/plan.md", content: lines }, "w"),
        call("read_file", { file_path: "/notes/plan.md", offset: 2, limit: 3 }, "r"),
        call("grep", { pattern: "needle", output_mode: "content" }, "g"),
        call("ls", { path: "/notes" }, "l"),
        ScriptedModel.text("done")
      ])
      const result = yield* agent.run("take notes", { threadId: "t" })
      assert.strictEqual(result._tag, "Completed")
      const messages = result.state.messages
      assert.strictEqual(resultOf(messages, "w").result, `Wrote ${lines.length} characters to /notes/plan.md`)
      assert.strictEqual(
        resultOf(messages, "r").result,
        "     3\tline 3\n     4\tline 4\n     5\tline 5\n... 5 more lines; read on with offset=5"
      )
      assert.strictEqual(resultOf(messages, "g").result, "/notes/plan.md:7: line 7 has the needle")
      assert.strictEqual(resultOf(messages, "l").result, "/notes/plan.md")
      assert.deepStrictEqual(result.state.files, { "/notes/plan.md": lines })
      // every model call offers the six tools and the system prompt tells the model about them
      const all = yield* requests
      assert.include(JSON.stringify(all[0]!.prompt.content[0]), "## Files")
      assert.deepStrictEqual(
        all.map((r) => r.toolNames.filter((n) => (Filesystem.toolNames as ReadonlyArray<string>).includes(n)).length),
        [6, 6, 6, 6, 6]
      )
    }))

  it.effect("edit_file fails when old_string is not unique, unless replace_all; the run goes on", () =>
    Effect.gen(function*() {
      const { agent } = yield* setup([
        call("write_file", { file_path: "/a.txt", content: "x = 1; x = 2" }, "w"),
        call("edit_file", { file_path: "/a.txt", old_string: "x", new_string: "y" }, "e1"),
        call("edit_file", { file_path: "/a.txt", old_string: "z", new_string: "y" }, "e2"),
        call("edit_file", { file_path: "/a.txt", old_string: "x", new_string: "y", replace_all: true }, "e3"),
        ScriptedModel.text("done")
      ])
      const result = yield* agent.run("edit", { threadId: "t" })
      const messages = result.state.messages
      const e1 = resultOf(messages, "e1")
      assert.isTrue(e1.isFailure)
      assert.deepStrictEqual(e1.result, {
        error: "The string to replace occurs 2 times in \"/a.txt\"; set replace_all to replace every occurrence, " +
          "or give a longer string that occurs once"
      })
      assert.isTrue(resultOf(messages, "e2").isFailure)
      assert.strictEqual(resultOf(messages, "e3").result, "Replaced 2 occurrences in /a.txt")
      assert.deepStrictEqual(result.state.files, { "/a.txt": "y = 1; y = 2" })
    }))

  it.effect("a write to a read-only path and a path above the root are failed results, not a failed run", () =>
    Effect.gen(function*() {
      const { agent } = yield* setup([
        call("write_file", { file_path: "/docs/guide.md", content: "changed" }, "ro"),
        call("read_file", { file_path: "/../../etc/passwd" }, "up"),
        call("write_file", { file_path: "/work/out.md", content: "ok" }, "rw"),
        ScriptedModel.text("done")
      ], { rules: [{ pattern: "/docs", access: "read-only" }] })
      const result = yield* agent.run("go", { threadId: "t" })
      assert.strictEqual(result._tag, "Completed")
      const messages = result.state.messages
      assert.deepStrictEqual(resultOf(messages, "ro").result, { error: "The path \"/docs/guide.md\" is read-only" })
      assert.deepStrictEqual(resultOf(messages, "up").result, {
        error: "The path \"/../../etc/passwd\" leads outside the workspace"
      })
      assert.deepStrictEqual(result.state.files, { "/work/out.md": "ok" })
    }))

  it.effect("the rules apply to routed paths: a read-only /memories rule keeps a mounted directory unwritten", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const root = yield* fs.makeTempDirectoryScoped()
      yield* fs.writeFileString(`${root}/user.md`, "likes tea")
      const memories = yield* Workspace.makeDirectory({ root })
      const { agent } = yield* setup([
        call("write_file", { file_path: "/memories/x.md", content: "planted" }, "w"),
        call("edit_file", { file_path: "/memories/user.md", old_string: "tea", new_string: "coffee" }, "e"),
        call("read_file", { file_path: "/memories/user.md" }, "r"),
        call("write_file", { file_path: "/notes.md", content: "ok" }, "ok"),
        ScriptedModel.text("done")
      ], { rules: [{ pattern: "/memories", access: "read-only" }], routes: { "/memories": memories } })
      const result = yield* agent.run("go", { threadId: "t" })
      const messages = result.state.messages
      assert.deepStrictEqual(resultOf(messages, "w").result, { error: "The path \"/memories/x.md\" is read-only" })
      assert.deepStrictEqual(resultOf(messages, "e").result, { error: "The path \"/memories/user.md\" is read-only" })
      assert.strictEqual(resultOf(messages, "r").result, "     1\tlikes tea")
      assert.deepStrictEqual(yield* fs.readDirectory(root), ["user.md"])
      assert.strictEqual(yield* fs.readFileString(`${root}/user.md`), "likes tea")
      assert.deepStrictEqual(result.state.files, { "/notes.md": "ok" })
    }).pipe(Effect.scoped, Effect.provide(NodeContext.layer)))

  it.effect("two writes in one reply both land in the state, and a read in the next turn sees them", () =>
    Effect.gen(function*() {
      const { agent } = yield* setup([
        ScriptedModel.toolCalls([
          { name: "write_file", params: { file_path: "/a.txt", content: "A" }, id: "a" },
          { name: "write_file", params: { file_path: "/b.txt", content: "B" }, id: "b" }
        ]),
        call("glob", { pattern: "*.txt" }, "g"),
        ScriptedModel.text("done")
      ])
      const result = yield* agent.run("go", { threadId: "t" })
      assert.deepStrictEqual(result.state.files, { "/a.txt": "A", "/b.txt": "B" })
      assert.strictEqual(resultOf(result.state.messages, "g").result, "/a.txt\n/b.txt")
    }))

  it.effect("the files survive a checkpoint written to disk and read by a new agent", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const directory = yield* fs.makeTempDirectoryScoped()
      const checkpoints = Checkpointer.layerFileSystem(directory)
      const first = yield* Effect.gen(function*() {
        const { agent } = yield* setup([
          call("write_file", { file_path: "/memory.md", content: "remember: 42\n" }, "w"),
          ScriptedModel.text("noted")
        ])
        return yield* agent.run("remember 42", { threadId: "t" })
      }).pipe(Effect.provide(checkpoints))
      assert.deepStrictEqual(first.state.files, { "/memory.md": "remember: 42\n" })

      // a new process: another middleware value, agent, model, on the same folder
      const second = yield* Effect.gen(function*() {
        const { agent } = yield* setup([
          call("edit_file", { file_path: "/memory.md", old_string: "42", new_string: "43" }, "e"),
          call("read_file", { file_path: "/memory.md" }, "r"),
          ScriptedModel.text("updated")
        ])
        return yield* agent.run("it is 43 now", { threadId: "t" })
      }).pipe(Effect.provide(checkpoints))
      assert.strictEqual(resultOf(second.state.messages, "r").result, "     1\tremember: 43\n     2\t")
      assert.deepStrictEqual(second.state.files, { "/memory.md": "remember: 43\n" })
      assert.deepStrictEqual(Filesystem.filesOf(second.state), Option.some({ "/memory.md": "remember: 43\n" }))
    }).pipe(Effect.scoped, Effect.provide(NodeContext.layer)))

  it.effect("bad options fail Agent.make naming the option", () =>
    Effect.gen(function*() {
      const model = yield* ScriptedModel.make([])
      const error = yield* Agent.make({
        middleware: [Filesystem.middleware({ rules: [{ pattern: "/docs", access: "read-mostly" as any }] })]
      }).pipe(Effect.provideService(LanguageModel.LanguageModel, model.model), Effect.flip)
      assert.strictEqual(error._tag, "InvalidOptions")
      assert.include(error.message, "rules[0].access")
      // a rule pattern refused by the workspaces is refused here too
      const refused = yield* Agent.make({
        middleware: [Filesystem.middleware({ rules: [{ pattern: "/docs/../x/*", access: "read-only" }] })]
      }).pipe(Effect.provideService(LanguageModel.LanguageModel, model.model), Effect.flip)
      assert.strictEqual(refused._tag, "InvalidOptions")
      assert.include(refused.message, "rules[0].pattern")
    }))
})

describe("Filesystem (a Workspace service)", () => {
  it.effect("the middleware's rules apply over the service and its routes", () =>
    Effect.gen(function*() {
      const memories = yield* Workspace.makeMemory({ files: { "/user.md": "likes tea" } })
      const service = yield* Workspace.makeMemory()
      const model = yield* ScriptedModel.make([
        call("write_file", { file_path: "/memories/x.md", content: "planted" }, "routed"),
        call("edit_file", { file_path: "/memories/user.md", old_string: "tea", new_string: "coffee" }, "edit"),
        call("write_file", { file_path: "/docs/a.md", content: "x" }, "service"),
        call("write_file", { file_path: "/notes.md", content: "ok" }, "ok"),
        ScriptedModel.text("done")
      ])
      const agent = yield* Agent.make({
        middleware: [
          Filesystem.middleware({
            storage: "workspace",
            routes: { "/memories": memories },
            rules: [{ pattern: "/memories", access: "read-only" }, { pattern: "/docs/**", access: "read-only" }]
          })
        ]
      }).pipe(
        Effect.provideService(LanguageModel.LanguageModel, model.model),
        Effect.provideService(Workspace.Workspace, service)
      )
      const messages = (yield* agent.run("go", { threadId: "t" })).state.messages
      assert.deepStrictEqual(resultOf(messages, "routed").result, { error: "The path \"/memories/x.md\" is read-only" })
      assert.deepStrictEqual(resultOf(messages, "edit").result, {
        error: "The path \"/memories/user.md\" is read-only"
      })
      assert.deepStrictEqual(resultOf(messages, "service").result, { error: "The path \"/docs/a.md\" is read-only" })
      assert.deepStrictEqual(yield* memories.glob("**"), ["/user.md"])
      assert.strictEqual(yield* memories.read("/user.md"), "likes tea")
      assert.deepStrictEqual(yield* service.glob("**"), ["/notes.md"])
    }))

  it.effect("works on a real directory and rejects a symbolic link out of the root as a tool result", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const root = yield* fs.makeTempDirectoryScoped()
      const outside = yield* fs.makeTempDirectoryScoped()
      yield* fs.writeFileString(`${outside}/secret.txt`, "secret")
      yield* fs.symlink(outside, `${root}/escape`)
      yield* fs.makeDirectory(`${root}/src`)
      yield* fs.writeFileString(`${root}/src/main.ts`, "export const answer = 42\n")
      const model = yield* ScriptedModel.make([
        call("read_file", { file_path: "/escape/secret.txt" }, "leak"),
        call("write_file", { file_path: "/escape/planted.txt", content: "x" }, "plant"),
        call("grep", { pattern: "answer" }, "g"),
        call("write_file", { file_path: "/src/new.ts", content: "export {}\n" }, "w"),
        call("write_file", { file_path: "/package.json", content: "{}" }, "ro"),
        ScriptedModel.text("done")
      ])
      const agent = yield* Agent.make({ middleware: [Filesystem.middleware({ storage: "workspace" })] }).pipe(
        Effect.provideService(LanguageModel.LanguageModel, model.model),
        Effect.provide(
          Workspace.layerDirectory({ root, rules: [{ pattern: "/package.json", access: "read-only" }] }).pipe(
            Layer.provide(NodeContext.layer)
          )
        )
      )
      const result = yield* agent.run("look around", { threadId: "t" })
      assert.strictEqual(result._tag, "Completed")
      const messages = result.state.messages
      assert.deepStrictEqual(resultOf(messages, "leak").result, {
        error: "The path \"/escape/secret.txt\" leads outside the workspace"
      })
      assert.isTrue(resultOf(messages, "plant").isFailure)
      assert.isFalse(yield* fs.exists(`${outside}/planted.txt`))
      assert.strictEqual(resultOf(messages, "g").result, "/src/main.ts")
      assert.strictEqual(yield* fs.readFileString(`${root}/src/new.ts`), "export {}\n")
      assert.deepStrictEqual(resultOf(messages, "ro").result, { error: "The path \"/package.json\" is read-only" })
      assert.isFalse(yield* fs.exists(`${root}/package.json`))
    }).pipe(Effect.scoped, Effect.provide(NodeContext.layer)))
})

describe("Filesystem: a long glob", () => {
  it.live("toolTimeout ends it, and another run of the same agent goes on meanwhile", () =>
    Effect.gen(function*() {
      const files: Record<string, string> = {}
      for (let i = 0; i < 5_000; i++) files[`/${"a".repeat(200)}${i}`] = ""
      const inner = yield* Workspace.makeMemory({ files })
      const globbing = yield* Deferred.make<void>()
      // the workspace tells when the glob has started, and searches again and again: the search never ends by itself
      // however fast the machine, so only toolTimeout can end it (a single search ends in seconds, which a fast
      // machine made shorter than the timeout)
      const workspace = Workspace.Workspace.of({
        ...inner,
        glob: (pattern, path) =>
          Effect.zipRight(Deferred.succeed(globbing, undefined), Effect.forever(inner.glob(pattern, path)))
      })
      const model = yield* ScriptedModel.make([
        call("glob", { pattern: "*a".repeat(120) + "b" }, "slow"),
        call("ls", {}, "quick"),
        ScriptedModel.text("the other run is done"),
        ScriptedModel.text("the glob run is done")
      ])
      const agent = yield* Agent.make({
        middleware: [Filesystem.middleware({ storage: "workspace" })],
        toolTimeout: "10 seconds"
      }).pipe(
        Effect.provideService(LanguageModel.LanguageModel, model.model),
        Effect.provideService(Workspace.Workspace, workspace)
      )
      const slow = yield* Effect.fork(agent.run("glob", { threadId: "slow" }))
      yield* Deferred.await(globbing)
      const other = yield* agent.run("list", { threadId: "other" })
      assert.strictEqual(other._tag, "Completed")
      assert.isTrue(Option.isNone(yield* Fiber.poll(slow)), "the glob run is still running")
      const result = yield* Fiber.join(slow)
      assert.strictEqual(result._tag, "Completed")
      const timedOut = resultOf(result.state.messages, "slow")
      assert.isTrue(timedOut.isFailure)
      assert.match(JSON.stringify(timedOut.result), /stopped/)
    }), { timeout: 60_000 })
})
