/**
 * A step on a long thread does work for the step's new messages only: what
 * the model call does to the thread (pairing calls and results, lifting files
 * out of tool results) reads a thread that extends one it saw before only
 * past where that one ended, and gives what reading the whole thread gives.
 */
import { Prompt } from "@effect/ai"
import { assert, describe, it } from "@effect/vitest"
import { FastCheck } from "effect"
import * as Lineage from "../src/internal/fast/lineage.js"
import { paired } from "../src/internal/pairing.js"
import * as ToolFiles from "../src/internal/toolFiles.js"

const png = "iVBORw0KGgo="

const toolMessage = (i: number, withFile: boolean): Prompt.Message =>
  Prompt.makeMessage("tool", {
    content: [
      Prompt.makePart("tool-result", {
        id: `call_${i}`,
        name: "look",
        result: withFile ? [{ type: "file", mediaType: "image/png", data: png }, `result ${i}`] : `result ${i}`,
        isFailure: false,
        providerExecuted: false
      })
    ]
  })

const callMessage = (i: number): Prompt.Message =>
  Prompt.makeMessage("assistant", {
    content: [Prompt.makePart("tool-call", { id: `call_${i}`, name: "look", params: {}, providerExecuted: false })]
  })

/** A message whose `role` counts its reads (a message the lift reads again is read through it). */
const counted = (message: Prompt.Message, reads: { n: number }): Prompt.Message =>
  new Proxy(message, {
    get: (target, key, receiver) => {
      if (key === "role") reads.n++
      return Reflect.get(target, key, receiver)
    }
  })

/** The lift of a copy of `messages` that no lineage record relates to any thread: every message read. */
const liftedAfresh = (messages: ReadonlyArray<Prompt.Message>) => ToolFiles.lift([...messages])

/** What the model call sends of a thread: paired, then its files lifted. */
const sent = (messages: ReadonlyArray<Prompt.Message>) => ToolFiles.lift(paired(messages))

/** The same for a copy of `messages` that no lineage record relates to any thread. */
const sentAfresh = (messages: ReadonlyArray<Prompt.Message>) => ToolFiles.lift(paired([...messages]))

/** A tool message whose result answers no call (as input history may hold). */
const orphan = (i: number) => toolMessage(1_000_000 + i, false)

describe("flat threads: what a model call does to the thread", () => {
  it("reads only the messages a thread added since the thread it extends was lifted", () => {
    const reads = { n: 0 }
    const base: Array<Prompt.Message> = [
      Prompt.makeMessage("user", { content: [Prompt.makePart("text", { text: "go" })] })
    ]
    for (let i = 0; i < 200; i++) base.push(counted(callMessage(i), reads), counted(toolMessage(i, false), reads))
    let thread: ReadonlyArray<Prompt.Message> = base
    ToolFiles.lift(thread)
    for (let step = 200; step < 210; step++) {
      thread = Lineage.appendWithRoom(thread, [callMessage(step)])
      thread = Lineage.extendUnseen(thread, [toolMessage(step, false)])
      reads.n = 0
      assert.strictEqual(ToolFiles.lift(thread), thread)
      assert.strictEqual(reads.n, 0, `step ${step} read the thread's earlier messages again`)
    }
  })

  it("continues from the loaded thread on a second run that starts on it", () => {
    const reads = { n: 0 }
    const loaded: Array<Prompt.Message> = []
    for (let i = 0; i < 100; i++) loaded.push(counted(callMessage(i), reads), counted(toolMessage(i, i === 3), reads))
    // two runs on the same loaded thread, each appending its own messages
    for (const run of [0, 1]) {
      const thread = Lineage.appendWithRoom(loaded, [
        Prompt.makeMessage("user", { content: [Prompt.makePart("text", { text: `run ${run}` })] })
      ])
      reads.n = 0
      const lifted = ToolFiles.lift(thread)
      if (run === 1) assert.strictEqual(reads.n, 0, "the second run read the loaded thread again")
      assert.deepStrictEqual(lifted, liftedAfresh(thread))
    }
  })

  it("reads only a step's new messages of a thread that needed repairs (an orphan result early on)", () => {
    const reads = { n: 0 }
    const base: Array<Prompt.Message> = [
      Prompt.makeMessage("user", { content: [Prompt.makePart("text", { text: "go" })] }),
      counted(orphan(0), reads)
    ]
    for (let i = 0; i < 200; i++) base.push(counted(callMessage(i), reads), counted(toolMessage(i, i === 7), reads))
    let thread: ReadonlyArray<Prompt.Message> = base
    sent(thread)
    for (let step = 200; step < 210; step++) {
      thread = Lineage.appendWithRoom(thread, [callMessage(step)])
      thread = Lineage.extendUnseen(thread, [toolMessage(step, false)])
      reads.n = 0
      const request = sent(thread)
      assert.strictEqual(reads.n, 0, `step ${step} read the thread's earlier messages again`)
      assert.deepStrictEqual(request, sentAfresh(thread))
    }
  })

  it.prop(
    "gives what lifting the whole thread gives, whatever the thread was made from",
    [
      FastCheck.array(
        FastCheck.record({
          op: FastCheck.constantFrom("append", "extend", "replaceLast", "derive"),
          from: FastCheck.nat(),
          keep: FastCheck.nat(),
          files: FastCheck.array(FastCheck.boolean(), { minLength: 1, maxLength: 3 })
        }),
        { minLength: 1, maxLength: 25 }
      )
    ],
    ([ops]) => {
      let id = 0
      // a tool message answering no call, or a call whose result never comes, now and then: repairs
      const fresh = (files: ReadonlyArray<boolean>) =>
        files.map((file, i) => i === 2 ? (file ? orphan(id++) : callMessage(id++)) : toolMessage(id++, file))
      const threads: Array<ReadonlyArray<Prompt.Message>> = [[
        Prompt.makeMessage("user", { content: [Prompt.makePart("text", { text: "go" })] })
      ]]
      for (const { files, from, keep, op } of ops) {
        const base = threads[from % threads.length]!
        const next = op === "append"
          ? Lineage.appendWithRoom(base, fresh(files))
          : op === "extend"
          ? Lineage.extendUnseen(Lineage.appendWithRoom(base, [callMessage(id++)]), fresh(files))
          : op === "replaceLast"
          ? Lineage.replaceLast(base, fresh(files)[0]!)
          : Lineage.derive(base.slice(0, keep % (base.length + 1)).concat(fresh(files)), base, keep % (base.length + 1))
        threads.push(next)
        // lifted in an order unrelated to how they were made
        const probe = threads[(from * 7 + keep) % threads.length]!
        assert.deepStrictEqual(ToolFiles.lift(probe), liftedAfresh(probe))
        assert.deepStrictEqual(ToolFiles.lift(next), liftedAfresh(next))
        assert.deepStrictEqual(sent(probe), sentAfresh(probe))
        assert.deepStrictEqual(sent(next), sentAfresh(next))
      }
    }
  )
})
