/**
 * Values as a run record keeps them: plain JSON with every known credential
 * scrubbed, compared by content (object keys in any order). A model request
 * is kept message by message, each message once per recording or replay
 * (the thread's messages are the same objects from one request to the next).
 */
import * as Prompt from "@effect/ai/Prompt"
import * as Either from "effect/Either"
import * as Schema from "effect/Schema"
import type * as RunJournal from "../RunJournal.js"
import * as Secrets from "../Secrets.js"
import { identityMemo } from "./fast/identityMemo.js"
import * as IdentityTable from "./fast/identityTable.js"
import { registry } from "./knownCredentials.js"

/** The field names seen and whether each names a credential (the same few names recur: `role`, `type`, `text`). */
const credentialKeys = new Map<string, boolean>()

const isCredentialKey = (key: string): boolean => {
  let named = credentialKeys.get(key)
  if (named === undefined) {
    named = Secrets.isCredentialName(key)
    if (credentialKeys.size >= 4096) credentialKeys.clear()
    credentialKeys.set(key, named)
  }
  return named
}

/**
 * `value` as plain JSON, with every known credential scrubbed as
 * `Secrets.scrubError` scrubs it. Each string is scrubbed as it is parsed
 * back (`Secrets.scrubText`); a value with a credential-named field takes
 * `scrubError`'s whole pass (which also replaces that field's value wherever
 * else it occurs).
 */
export const kept = (value: unknown): unknown => {
  const json = JSON.stringify(value)
  if (json === undefined) return null
  let credentialField = false
  const parsed = JSON.parse(json, (key, field) => {
    if (key !== "" && isCredentialKey(key)) credentialField = true
    return typeof field === "string" ? Secrets.scrubText(field) : field
  })
  return credentialField ? Secrets.scrubError(JSON.parse(json)) : parsed
}

/** `value` as plain JSON, not scrubbed. */
const plain = (value: unknown): unknown => {
  const json = JSON.stringify(value)
  return json === undefined ? null : JSON.parse(json)
}

/**
 * `value` encoded with `schema`, as plain JSON, scrubbed ({@link kept}) or
 * not; a value the schema does not encode (a hook handed the model something
 * out of shape) is taken as it is.
 */
export const keptAs = <A, I>(schema: Schema.Schema<A, I>, scrubbed = true) => {
  const encode = Schema.encodeEither(schema)
  const json = scrubbed ? kept : plain
  return (value: A): unknown => json(Either.getOrElse(encode(value), (): unknown => value))
}

const keptMessage = keptAs(Prompt.Message)
const plainMessage = keptAs(Prompt.Message, false)

/**
 * Keeps model requests as JSON, scrubbed or not, each message encoded once
 * (by identity, `fast/identityTable.ts`) for the life of the keeper; scrubbed,
 * a message kept before a credential became known (the first model call sends
 * the API key) is kept again, scrubbed of it.
 */
export const requestKeeper = (scrubbed: boolean) => {
  const json = scrubbed ? kept : plain
  const keepMessage = scrubbed ? keptWhileKnown(keptMessage) : identityMemo(plainMessage)
  return {
    messages: (list: ReadonlyArray<Prompt.Message>): ReadonlyArray<unknown> => list.map(keepMessage),
    request: (request: RunJournal.SentRequest): typeof RunJournal.SentRequest.Encoded =>
      ({
        step: request.step,
        ...(request.systemPrompt === undefined ? {} : { systemPrompt: json(request.systemPrompt) }),
        messages: request.messages.map(keepMessage),
        tools: json(request.tools),
        toolChoice: json(request.toolChoice)
      }) as typeof RunJournal.SentRequest.Encoded
  }
}

/**
 * `keep` remembered per message until a credential becomes known (`generation`
 * of the known credentials): a message kept before is kept again.
 */
const keptWhileKnown = <A extends object>(keep: (message: A) => unknown) => {
  const table = IdentityTable.make<A, { readonly generation: number; readonly kept: unknown }>()
  return (message: A): unknown => {
    const known = table.get(message)
    if (known !== undefined && known.generation === registry.generation) return known.kept
    const generation = registry.generation
    const value = keep(message)
    table.set(message, { generation, kept: value })
    return value
  }
}

/** Whether two plain JSON values are equal, whatever the order of their keys. */
export const same = (a: unknown, b: unknown): boolean => {
  if (a === b) return true
  if (typeof a !== "object" || typeof b !== "object" || a === null || b === null) return false
  if (Array.isArray(a)) return Array.isArray(b) && a.length === b.length && a.every((x, i) => same(x, b[i]))
  if (Array.isArray(b)) return false
  const recordA = a as Readonly<Record<string, unknown>>
  const recordB = b as Readonly<Record<string, unknown>>
  const keysA = Object.keys(recordA).filter((k) => recordA[k] !== undefined)
  const keysB = Object.keys(recordB).filter((k) => recordB[k] !== undefined)
  return keysA.length === keysB.length && keysA.every((k) => same(recordA[k], recordB[k]))
}
