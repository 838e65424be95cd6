import { assert, describe, it } from "@effect/vitest"
import { evaluate } from "../src/Calculator.js"

describe("Calculator", () => {
  it("follows precedence and parentheses", () => {
    assert.deepStrictEqual(evaluate("3 * 2.50 + 4 * 1.25 + 12.80"), { _tag: "Right", right: 25.3 })
    assert.deepStrictEqual(evaluate("(2 + 3) * -4"), { _tag: "Right", right: -20 })
    assert.deepStrictEqual(evaluate("10 / 4 - 1"), { _tag: "Right", right: 1.5 })
  })

  it("explains what it cannot read", () => {
    assert.deepStrictEqual(evaluate("3 x 2"), { _tag: "Left", left: "unexpected \"x\"" })
    assert.deepStrictEqual(evaluate("1 / 0"), { _tag: "Left", left: "division by zero" })
    assert.deepStrictEqual(evaluate("(1 + 2"), { _tag: "Left", left: "missing closing parenthesis" })
    assert.deepStrictEqual(evaluate(""), { _tag: "Left", left: "empty expression" })
  })
})
