/**
 * A small arithmetic evaluator for the demo's calculator tool: numbers,
 * `+ - * /`, unary minus and parentheses. No `eval`.
 *
 * @since 0.1.0
 */

/**
 * Evaluates an arithmetic expression, or returns an error message.
 *
 * @example
 * ```ts
 * import { evaluate } from "./Calculator.js"
 *
 * evaluate("3 * 2.5 + 4 * 1.25") // { _tag: "Right", right: 12.5 }
 * ```
 *
 * @since 0.1.0
 * @category utility
 */
export const evaluate = (
  expression: string
): { readonly _tag: "Right"; readonly right: number } | { readonly _tag: "Left"; readonly left: string } => {
  const tokens = expression.match(/\d+(?:\.\d+)?|[-+*/()]|\S/g) ?? []
  let position = 0
  const peek = () => tokens[position]
  const fail = (message: string): never => {
    throw new Error(message)
  }
  const primary = (): number => {
    const token = tokens[position++]
    if (token === undefined) return fail("unexpected end of expression")
    if (token === "(") {
      const value = sum()
      if (tokens[position++] !== ")") fail("missing closing parenthesis")
      return value
    }
    if (token === "-") return -primary()
    const value = Number(token)
    return Number.isFinite(value) ? value : fail(`unexpected "${token}"`)
  }
  const product = (): number => {
    let value = primary()
    while (peek() === "*" || peek() === "/") {
      const op = tokens[position++]
      const right = primary()
      if (op === "/" && right === 0) fail("division by zero")
      value = op === "*" ? value * right : value / right
    }
    return value
  }
  const sum = (): number => {
    let value = product()
    while (peek() === "+" || peek() === "-") {
      const op = tokens[position++]
      const right = product()
      value = op === "+" ? value + right : value - right
    }
    return value
  }
  try {
    if (tokens.length === 0) return { _tag: "Left", left: "empty expression" }
    const value = sum()
    if (position < tokens.length) return { _tag: "Left", left: `unexpected "${tokens[position]}"` }
    return { _tag: "Right", right: Math.round(value * 1e10) / 1e10 }
  } catch (error) {
    return { _tag: "Left", left: (error as Error).message }
  }
}
