/**
 * Decoding a stored message of the common shapes without its Schema: what
 * `Schema.decodeUnknownEither(Prompt.Message)` gives, built directly with
 * `Prompt.makeMessage` / `Prompt.makePart`, at a small fraction of the cost
 * (the first load of a long thread is mostly this decoding).
 *
 * Covered: system, user, assistant and tool messages whose content is a
 * string or text, reasoning, tool-call and tool-result parts, with options
 * absent or empty. Anything else (a file part, provider options, a field of
 * the wrong type, a missing field) gives `undefined`, and the caller decodes
 * through the Schema, which also reports what is wrong.
 */
import * as Prompt from "@effect/ai/Prompt"

type Raw = Record<string, unknown>

/** A plain object (as `JSON.parse` makes): its fields are its own, with no getters of a class. */
const isRaw = (u: unknown): u is Raw => {
  if (typeof u !== "object" || u === null) return false
  const prototype = Object.getPrototypeOf(u)
  return prototype === Object.prototype || prototype === null
}

const has = (raw: Raw, key: string) => Object.prototype.hasOwnProperty.call(raw, key)

/** Options the direct decoding covers: none, or an empty object (which decodes to a new empty object). */
const plainOptions = (raw: Raw): boolean => {
  const options = raw["options"]
  if (options === undefined) return true
  if (!isRaw(options)) return false
  for (const _ in options) return false
  return true
}

const textPart = (text: string) => Prompt.makePart("text", { text })

const decodePart = (raw: unknown, role: "user" | "assistant" | "tool"): Prompt.Part | undefined => {
  if (!isRaw(raw) || !plainOptions(raw)) return undefined
  const type = raw["type"]
  if (role === "tool" && type !== "tool-result") return undefined
  switch (type) {
    case "text":
    case "reasoning": {
      if (role === "user" && type === "reasoning") return undefined
      const text = raw["text"]
      return typeof text === "string" ? Prompt.makePart(type, { text }) : undefined
    }
    case "tool-call": {
      if (role === "user") return undefined
      const id = raw["id"]
      const name = raw["name"]
      const providerExecuted = raw["providerExecuted"] ?? false
      return typeof id === "string" && typeof name === "string" && typeof providerExecuted === "boolean" &&
          has(raw, "params")
        ? Prompt.makePart("tool-call", { id, name, params: raw["params"], providerExecuted })
        : undefined
    }
    case "tool-result": {
      if (role === "user") return undefined
      const id = raw["id"]
      const name = raw["name"]
      const isFailure = raw["isFailure"]
      const providerExecuted = raw["providerExecuted"]
      return typeof id === "string" && typeof name === "string" && typeof isFailure === "boolean" &&
          typeof providerExecuted === "boolean" && has(raw, "result")
        ? Prompt.makePart("tool-result", { id, name, isFailure, result: raw["result"], providerExecuted })
        : undefined
    }
    default:
      return undefined
  }
}

/** The decoded message, when `raw` has one of the shapes covered (see the module); `undefined` otherwise. */
export const decodeMessage = (raw: unknown): Prompt.Message | undefined => {
  if (!isRaw(raw) || !plainOptions(raw)) return undefined
  const role = raw["role"]
  const content = raw["content"]
  if (role === "system") return typeof content === "string" ? Prompt.makeMessage("system", { content }) : undefined
  if (role !== "user" && role !== "assistant" && role !== "tool") return undefined
  if (typeof content === "string") {
    return role === "tool" ? undefined : Prompt.makeMessage(role, { content: [textPart(content)] })
  }
  if (!Array.isArray(content)) return undefined
  const parts = new Array<Prompt.Part>(content.length)
  for (let i = 0; i < content.length; i++) {
    const part = decodePart(content[i], role)
    if (part === undefined) return undefined
    parts[i] = part
  }
  return Prompt.makeMessage(role, { content: parts } as never)
}
