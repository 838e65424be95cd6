/**
 * Writes the golden files of this folder with the current code:
 * `npx tsx --conditions=@stepwise-agent/source packages/core/test/golden/generate.ts`.
 *
 * A golden file is never written again: it is what a version of the code
 * stored, and every later version must decode it (`test/Golden.test.ts`).
 * This script writes only the files that are missing; a new stored format
 * gets a new file (`…-v2…`) beside the old one.
 */
import { Prompt } from "@effect/ai"
import { KeyValueStore } from "@effect/platform"
import * as NodeContext from "@effect/platform-node/NodeContext"
import { Agent, AgentState, Checkpointer, RunJournal } from "@stepwise-agent/core"
import { Fixtures, ScriptedModel } from "@stepwise-agent/testing"
import { Effect, Layer, Schema } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import * as Golden from "./golden.js"

const here = path.dirname(fileURLToPath(import.meta.url))
const missing = (name: string) => !fs.existsSync(path.join(here, name))
const write = (name: string, text: string) => {
  if (!missing(name)) return
  fs.writeFileSync(path.join(here, name), text)
  process.stdout.write(`wrote ${name}\n`)
}

/** A map-backed `KeyValueStore` whose entries can be written out. */
const mapStore = (entries: Map<string, string>) =>
  KeyValueStore.makeStringOnly({
    get: (key) => Effect.sync(() => Golden.optionOf(entries.get(key))),
    set: (key, value) => Effect.sync(() => void entries.set(key, value)),
    remove: (key) => Effect.sync(() => void entries.delete(key)),
    clear: Effect.sync(() => entries.clear()),
    size: Effect.sync(() => entries.size)
  })

const program = Effect.gen(function*() {
  const checkpoint = Golden.checkpoint
  // 1. a checkpoint as JSON (toJson: the SQL checkpointer's row, the legacy single-value format)
  write("checkpoint-v1.json", (yield* Checkpointer.toJson(checkpoint.threadId, checkpoint)) + "\n")

  // 2. the thread log on a KeyValueStore: the head (version 2), full chunks and a tail
  if (missing("keyValueStore-v2.json")) {
    const entries = new Map<string, string>()
    const checkpointer = yield* Checkpointer.makeKeyValueStore().pipe(
      Effect.provideService(KeyValueStore.KeyValueStore, mapStore(entries))
    )
    // saved twice: the second save appends to the log the first one wrote
    yield* checkpointer.save(checkpoint.threadId, { ...checkpoint, messages: checkpoint.messages.slice(0, 60) })
    yield* checkpointer.save(checkpoint.threadId, checkpoint)
    write("keyValueStore-v2.json", JSON.stringify(Object.fromEntries(entries), null, 2) + "\n")
  }

  // 3. the thread log on the file system: `<thread>.json` and `<thread>.<generation>.log`
  if (missing("fileSystem-v2")) {
    const directory = path.join(here, "fileSystem-v2")
    const checkpointer = yield* Checkpointer.makeFileSystem(directory)
    yield* checkpointer.save(checkpoint.threadId, { ...checkpoint, messages: checkpoint.messages.slice(0, 60) })
    yield* checkpointer.save(checkpoint.threadId, checkpoint)
    process.stdout.write("wrote fileSystem-v2/\n")
  }

  // 4. a run's journal: each step's value, encoded with the schema its key carries
  if (missing("journal-v1.json")) {
    const checkpointer = yield* Checkpointer.makeMemory
    const entries: Record<string, unknown> = {}
    const recording = RunJournal.RunJournal.of({
      ...RunJournal.inProcess,
      step: <A, E, R>(key: RunJournal.StepKey<A>, effect: Effect.Effect<A, E, R>) =>
        Effect.tap(effect, (value) =>
          Effect.sync(() => {
            entries[RunJournal.stepName(key)] = Schema.encodeSync(key.schema)(value) ?? null
          }))
    })
    const agent = yield* Agent.make({
      toolkit: Fixtures.echoToolkit,
      middleware: [Golden.counter],
      maxSteps: 10
    }).pipe(
      Effect.provide(Layer.mergeAll(
        Fixtures.echoLayer,
        Layer.succeed(Checkpointer.Checkpointer, checkpointer),
        ScriptedModel.layer(Golden.script)
      ))
    )
    yield* agent.run("first", { threadId: "golden" })
    const result = yield* agent.run("second", { threadId: "golden" }).pipe(
      Effect.provideService(RunJournal.RunJournal, recording)
    )
    if (result._tag !== "Completed") throw new Error("the recorded run did not complete")
    write(
      "journal-v1.json",
      JSON.stringify(
        {
          entries,
          result: {
            text: result.text,
            steps: result.steps,
            usage: { ...result.usage },
            messages: AgentState.encodeMessages(result.state.messages)
          }
        },
        null,
        2
      ) + "\n"
    )
  }

  // 5. the value of each kind of journal step, one of each, as stored
  write(
    "journal-entries-v1.json",
    JSON.stringify(
      {
        load: Schema.encodeSync(Golden.LoadStep)(
          Golden.optionOf({ ...checkpoint, messages: checkpoint.messages.slice(0, 3) })
        ),
        inbox: Schema.encodeSync(Golden.InboxStep)([
          Prompt.makeMessage("user", { content: [Prompt.makePart("text", { text: "steer: be brief" })] })
        ]),
        model: Schema.encodeSync(RunJournal.ModelCall)(Golden.modelCall),
        tool: Schema.encodeSync(Prompt.ToolResultPart)(Golden.toolResult)
      },
      null,
      2
    ) + "\n"
  )
})

await Effect.runPromise(program.pipe(Effect.provide(NodeContext.layer)))

// record-v1.jsonl is not written here: it is a `RunRecord` JSONL as the code of commit f21f2c0 wrote it (a tool call
// cleared by HumanInTheLoop's `when`, a decision reported inside the call, without the `inStep` its entry has now).
// `test/Golden.test.ts` replays it on the agent that recorded it.
// record-resumed-v1.jsonl is not written here either: the `RunRecord.recordResume` JSONL (format version 1) of a run
// resumed with `{ go: true, times: 2 }` (`times` a `NumberFromString`), as the code of commit 75ccbb8 wrote it: the
// decision kept decoded, as JSON. `test/RunRecordResume.test.ts` replays it on the agent that recorded it.
