import { assert, describe, it } from "@effect/vitest"
import { FastCheck } from "effect"
import * as Machine from "../src/internal/machine.js"

type Step = Machine.HookNode | "model" | "tools"
type Outcome = "continue" | "model" | "tools" | "end"

const hookNodes: ReadonlyArray<Machine.HookNode> = ["beforeAgent", "beforeModel", "afterModel", "afterAgent"]
const facts = FastCheck.record({ callsTools: FastCheck.boolean(), hasOutput: FastCheck.boolean() })
const outcome = FastCheck.constantFrom<Outcome>("continue", "model", "tools", "end")

/** Walks the machine from `beforeAgent`: the nodes visited, in order, until `done` or the moves run out. */
const walk = (moves: ReadonlyArray<{ readonly outcome: Outcome; readonly facts: Machine.Facts }>) => {
  const visited: Array<string> = []
  let phase: Machine.Phase = { node: "beforeAgent", index: 0 }
  for (const move of moves) {
    if (phase.node === "done") break
    visited.push(phase.node)
    const from: Step = phase.node
    // model and tool steps only continue; hook nodes may also jump
    phase = Machine.next(from, from === "model" || from === "tools" ? "continue" : move.outcome, move.facts)
  }
  return { visited, phase }
}

describe("the phase machine", () => {
  it("a run where every hook continues goes through each node in order", () => {
    const none = { callsTools: false, hasOutput: false }
    const moves = Array.from({ length: 10 }, () => ({ outcome: "continue" as const, facts: none }))
    assert.deepStrictEqual(walk(moves), {
      visited: ["beforeAgent", "beforeModel", "model", "afterModel", "afterAgent"],
      phase: { node: "done" }
    })
  })

  it("a reply with tool calls goes to the tools, then back to beforeModel, or to afterAgent with the output", () => {
    assert.deepStrictEqual(Machine.next("afterModel", "continue", { callsTools: true, hasOutput: false }), {
      node: "tools"
    })
    assert.deepStrictEqual(Machine.next("tools", "continue", { callsTools: false, hasOutput: false }), {
      node: "beforeModel",
      index: 0
    })
    assert.deepStrictEqual(Machine.next("tools", "continue", { callsTools: false, hasOutput: true }), {
      node: "afterAgent",
      index: 0
    })
  })

  it.prop("beforeAgent runs once per run, whatever the hooks answer", [
    FastCheck.array(FastCheck.record({ outcome, facts }))
  ], ([moves]) => {
    const { visited } = walk(moves)
    assert.isAtMost(visited.filter((node) => node === "beforeAgent").length, 1)
  })

  it.prop(
    "a hook node always starts from its first hook",
    [FastCheck.array(FastCheck.record({ outcome, facts }))],
    ([moves]) => {
      let phase: Machine.Phase = { node: "beforeAgent", index: 0 }
      for (const move of moves) {
        if (phase.node === "done") return
        const from = phase.node
        phase = Machine.next(from, from === "model" || from === "tools" ? "continue" : move.outcome, move.facts)
        if ("index" in phase) assert.strictEqual(phase.index, 0)
      }
    }
  )

  it.prop("a jump to end never calls the model again: afterAgent runs once, then the run is done", [
    FastCheck.constantFrom(...hookNodes),
    facts,
    FastCheck.array(facts, { minLength: 1 })
  ], ([from, first, later]) => {
    let phase = Machine.next(from, "end", first)
    const seen: Array<string> = []
    for (const f of later) {
      if (phase.node === "done") break
      seen.push(phase.node)
      assert.strictEqual(phase.node, "afterAgent")
      phase = Machine.next("afterAgent", "continue", f)
    }
    assert.isAtMost(seen.length, 1)
    if (from === "afterAgent") assert.deepStrictEqual(phase, { node: "done" })
  })

  it.prop("a jump to model reaches the model through beforeModel; a jump to tools goes straight to the tools", [
    FastCheck.constantFrom(...hookNodes),
    facts
  ], ([from, f]) => {
    assert.deepStrictEqual(Machine.next(from, "tools", f), { node: "tools" })
    const jumped = Machine.next(from, "model", f)
    assert.deepStrictEqual(jumped, from === "beforeModel" ? { node: "model" } : { node: "beforeModel", index: 0 })
  })

  it.prop("the tools run only after a reply that calls tools, or on a jump", [
    FastCheck.array(FastCheck.record({ outcome, facts }))
  ], ([moves]) => {
    let phase: Machine.Phase = { node: "beforeAgent", index: 0 }
    for (const move of moves) {
      if (phase.node === "done") return
      const from = phase.node
      const said = from === "model" || from === "tools" ? "continue" : move.outcome
      phase = Machine.next(from, said, move.facts)
      if (phase.node === "tools") assert.isTrue(said === "tools" || (from === "afterModel" && move.facts.callsTools))
    }
  })
})
