/**
 * Scripted runs for property tests: tool-calling turns (valid calls of the
 * calculator's `add`, calls with invalid arguments, calls of unknown tools),
 * then a final text reply, and the model turns that play them.
 */
import { ScriptedModel } from "@stepwise-agent/testing"
import { FastCheck } from "effect"

/** A tool call of a scripted turn: a valid `add`, one with invalid arguments, or one of an unknown tool. */
export const CallArb = FastCheck.oneof(
  FastCheck.record({
    kind: FastCheck.constant("add" as const),
    a: FastCheck.integer({ min: -1000, max: 1000 }),
    b: FastCheck.integer({ min: -1000, max: 1000 })
  }),
  FastCheck.record({ kind: FastCheck.constant("invalid" as const), a: FastCheck.string({ maxLength: 5 }) }),
  FastCheck.record({ kind: FastCheck.constant("unknown" as const), name: FastCheck.constantFrom("multiply", "divide") })
)

/** Up to three tool-calling turns, each with some text (any code points with `binary`) and one to three calls. */
export const turnsArb = (unit?: "binary") =>
  FastCheck.array(
    FastCheck.record({
      text: FastCheck.option(FastCheck.string({ maxLength: 30, ...(unit === undefined ? {} : { unit }) }), {
        nil: undefined
      }),
      calls: FastCheck.array(CallArb, { minLength: 1, maxLength: 3 })
    }),
    { maxLength: 3 }
  )

/** What the model turns are made from: the tool-calling turns and the final reply. */
export interface Turns {
  readonly turns: ReadonlyArray<{
    readonly text: string | undefined
    readonly calls: ReadonlyArray<typeof CallArb extends FastCheck.Arbitrary<infer A> ? A : never>
  }>
  readonly final: string
}

/** The model turns that play `script`: each call gets the id `call_<turn>_<call>`. */
export const toTurns = (script: Turns): ReadonlyArray<ScriptedModel.Turn> => [
  ...script.turns.map((turn, t) =>
    ScriptedModel.toolCalls(
      turn.calls.map((call, c) => {
        const id = `call_${t}_${c}`
        switch (call.kind) {
          case "add":
            return { id, name: "add", params: { a: call.a, b: call.b } }
          case "invalid":
            return { id, name: "add", params: { a: call.a } }
          case "unknown":
            return { id, name: call.name, params: { a: 1, b: 2 } }
        }
      }),
      { text: turn.text }
    )
  ),
  ScriptedModel.text(script.final)
]
