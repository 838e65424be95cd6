/**
 * A thread with the files of its tool results lifted (`../toolFiles.ts`),
 * remembered per line of threads (see `lineage.ts`), so that a thread that
 * extends one lifted before is read only past where that one ended.
 */
import type * as Prompt from "@effect/ai/Prompt"
import { liftMessage } from "../toolFiles.js"
import { identityMemo } from "./identityMemo.js"
import * as Lineage from "./lineage.js"

/** Each tool message lifted once (`null`: it holds no file). */
const lifted = identityMemo((message: Prompt.ToolMessage) => liftMessage(message) ?? null)

/**
 * How far each line of threads (see `lineage.ts`) was lifted: for its
 * first `length` messages, their lifted copy, or `undefined` when they hold
 * no file (the lifted thread is then the thread itself). Lifting a message
 * depends on that message alone, so a thread that extends one lifted before
 * is lifted only past where that one ended.
 */
const liftedThreads = new Lineage.PrefixMemo<ReadonlyArray<Prompt.Message> | undefined>()

/**
 * `messages` with the files of tool results as file parts (see the module); the same array without any. A
 * thread that extends one lifted before is read only past where that one ended.
 */
export const lift = (messages: ReadonlyArray<Prompt.Message>): ReadonlyArray<Prompt.Message> => {
  const known = liftedThreads.get(messages)
  if (known !== undefined && known.length === messages.length) return known.value ?? messages
  const start = known?.length ?? 0
  let out: Array<Prompt.Message> | undefined = known?.value?.slice()
  // with nothing lifted to continue from, the thread `messages` was appended to is remembered as lifted, so that
  // another thread appended to it (a later run on the same loaded thread) continues from there
  const base = known === undefined ? Lineage.origin(messages) : undefined
  for (let i = start; i < messages.length; i++) {
    if (i === base && base < messages.length) liftedThreads.set(messages, out?.slice(), i)
    const message = messages[i]!
    let replaced: ReadonlyArray<Prompt.Message> | null | undefined
    if (message.role === "tool") {
      replaced = lifted(message)
    }
    if (replaced !== undefined && replaced !== null) {
      out ??= messages.slice(0, i)
      out.push(...replaced)
    } else {
      out?.push(message)
    }
  }
  liftedThreads.set(messages, out)
  return out ?? messages
}
