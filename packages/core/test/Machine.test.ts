import { assert, describe, it } from "@effect/vitest"
import { FastCheck } from "effect"
import * as Driver from "../src/internal/driver.js"
import * as Machine from "../src/internal/machine.js"

type Said = "continue" | "model" | "tools" | "end"

const hookNodes: ReadonlyArray<Machine.HookNode> = ["beforeAgent", "beforeModel", "afterModel", "afterAgent"]
const facts = FastCheck.record({ callsTools: FastCheck.boolean(), hasOutput: FastCheck.boolean() })
const said = FastCheck.constantFrom<Said>("continue", "model", "tools", "end")

const isHook = (phase: Machine.Phase): phase is { readonly node: Machine.HookNode; readonly index: number } =>
  (hookNodes as ReadonlyArray<string>).includes(phase.node)

/** What a phase says: hook nodes may jump, the other routed phases only continue. */
const outcomeOf = (phase: Machine.Phase, move: Said) =>
  isHook(phase) && move !== "continue" ? { _tag: "Jump" as const, to: move } : { _tag: "Continue" as const }

/** Walks the machine from `beforeAgent`: the phases visited, in order, until `done` or the moves run out. */
const walk = (moves: ReadonlyArray<{ readonly said: Said; readonly facts: Machine.Facts }>) => {
  const visited: Array<string> = []
  let phase: Machine.Phase = { node: "beforeAgent", index: 0 }
  for (const move of moves) {
    if (phase.node === "done") break
    visited.push(phase.node)
    phase = Machine.next(phase, outcomeOf(phase, move.said), move.facts)
  }
  return { visited, phase }
}

const none = { callsTools: false, hasOutput: false }
const wait: Machine.Wait = {
  node: "afterModel",
  index: 2,
  middleware: "hitl",
  request: "ask",
  value: "ask",
  key: undefined
}

describe("the phase machine", () => {
  it("every phase is a table entry: routed by `flow`, or a wait or the end, and the driver has a step for each", () => {
    const routed = Object.keys(Machine.flow).sort()
    assert.deepStrictEqual(routed, [
      "afterAgent",
      "afterModel",
      "beforeAgent",
      "beforeModel",
      "model",
      "receive",
      "tools"
    ])
    const steps = Object.keys(
      Driver.steps({ nodes: {}, layout: {}, wrapModel: [], wrapTool: [] } as any, (() => undefined) as any)
    ).sort()
    assert.deepStrictEqual(steps, [...routed, "done", "wait"].sort())
  })

  it("a run where every hook continues goes through each phase in order", () => {
    const moves = Array.from({ length: 10 }, () => ({ said: "continue" as const, facts: none }))
    assert.deepStrictEqual(walk(moves), {
      visited: ["beforeAgent", "receive", "beforeModel", "model", "afterModel", "afterAgent"],
      phase: { node: "done" }
    })
  })

  it("a reply with tool calls goes to the tools, then back through receive, or to afterAgent with the output", () => {
    const afterModel: Machine.Phase = { node: "afterModel", index: 0 }
    const tools: Machine.Phase = { node: "tools" }
    assert.deepStrictEqual(Machine.next(afterModel, Machine.Continue, { callsTools: true, hasOutput: false }), tools)
    assert.deepStrictEqual(Machine.next(tools, Machine.Continue, none), { node: "receive" })
    assert.deepStrictEqual(Machine.next(tools, Machine.Continue, { callsTools: false, hasOutput: true }), {
      node: "afterAgent",
      index: 0
    })
  })

  it("a hook that asks to wait leads to the wait; a wait answered at once goes back to the hook that waits", () => {
    const from: Machine.Phase = { node: "afterModel", index: 2 }
    const waiting = Machine.next(from, { _tag: "Interrupt", wait }, none)
    assert.deepStrictEqual(waiting, { node: "wait", wait })
    assert.deepStrictEqual(Machine.next(waiting, Machine.Resume, none), { node: "afterModel", index: 2 })
  })

  it.prop("every way into beforeModel passes receive first", [FastCheck.array(FastCheck.record({ said, facts }))], ([
    moves
  ]) => {
    const { visited } = walk(moves)
    visited.forEach((node, i) => {
      if (node === "beforeModel") assert.strictEqual(visited[i - 1], "receive")
    })
  })

  it.prop("beforeAgent runs once per run, whatever the hooks answer", [
    FastCheck.array(FastCheck.record({ said, facts }))
  ], ([moves]) => {
    const { visited } = walk(moves)
    assert.isAtMost(visited.filter((node) => node === "beforeAgent").length, 1)
  })

  it.prop("a hook node reached by a route starts from its first hook", [
    FastCheck.array(FastCheck.record({ said, facts }))
  ], ([moves]) => {
    let phase: Machine.Phase = { node: "beforeAgent", index: 0 }
    for (const move of moves) {
      if (phase.node === "done") return
      phase = Machine.next(phase, outcomeOf(phase, move.said), move.facts)
      if ("index" in phase) assert.strictEqual(phase.index, 0)
    }
  })

  it.prop("a jump to end never calls the model again: afterAgent runs once, then the run is done", [
    FastCheck.constantFrom(...hookNodes),
    facts,
    FastCheck.array(facts, { minLength: 1 })
  ], ([from, first, later]) => {
    let phase = Machine.next({ node: from, index: 0 }, { _tag: "Jump", to: "end" }, first)
    const seen: Array<string> = []
    for (const f of later) {
      if (phase.node === "done") break
      seen.push(phase.node)
      assert.strictEqual(phase.node, "afterAgent")
      phase = Machine.next(phase, Machine.Continue, f)
    }
    assert.isAtMost(seen.length, 1)
    if (from === "afterAgent") assert.deepStrictEqual(phase, { node: "done" })
  })

  it.prop("a jump to model reaches the model through receive and beforeModel; a jump to tools goes to the tools", [
    FastCheck.constantFrom(...hookNodes),
    facts
  ], ([from, f]) => {
    const phase: Machine.Phase = { node: from, index: 0 }
    assert.deepStrictEqual(Machine.next(phase, { _tag: "Jump", to: "tools" }, f), { node: "tools" })
    const jumped = Machine.next(phase, { _tag: "Jump", to: "model" }, f)
    assert.deepStrictEqual(jumped, from === "beforeModel" ? { node: "model" } : { node: "receive" })
  })

  it.prop("the tools run only after a reply that calls tools, or on a jump", [
    FastCheck.array(FastCheck.record({ said, facts }))
  ], ([moves]) => {
    let phase: Machine.Phase = { node: "beforeAgent", index: 0 }
    for (const move of moves) {
      if (phase.node === "done") return
      const from = phase
      const outcome = outcomeOf(phase, move.said)
      phase = Machine.next(phase, outcome, move.facts)
      if (phase.node === "tools") {
        assert.isTrue(outcome._tag === "Jump" || (from.node === "afterModel" && move.facts.callsTools))
      }
    }
  })
})
