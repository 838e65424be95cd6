/**
 * Files in tool results, as the model receives them. Providers send a tool
 * result as JSON text, so an image a tool returned would reach the model as
 * base64 text; they take files only as file parts of a user message. A tool
 * result that is an array holding file items (`{ type: "file", mediaType,
 * data }`, `data` in base64, as `McpToolkit` gives an MCP server's images)
 * is sent with each file item replaced by a note, and the files follow the
 * tool message as a user message of file parts. The stored conversation is
 * not changed (it stays JSON); only the request is.
 */
import * as Prompt from "@effect/ai/Prompt"
import * as Either from "effect/Either"
import * as Encoding from "effect/Encoding"
import * as Predicate from "effect/Predicate"
import { identityMemo } from "./fast/identityMemo.js"
import * as Lineage from "./fast/lineage.js"

interface FileItem {
  readonly type: "file"
  readonly mediaType: string
  readonly data: string
  readonly fileName?: string | undefined
}

const isFileItem = (u: unknown): u is FileItem =>
  Predicate.hasProperty(u, "type") && u.type === "file" && Predicate.hasProperty(u, "mediaType") &&
  typeof u.mediaType === "string" && Predicate.hasProperty(u, "data") && typeof u.data === "string" &&
  (!Predicate.hasProperty(u, "fileName") || u.fileName === undefined || typeof u.fileName === "string")

const hasFiles = (part: Prompt.ToolResultPart) => Array.isArray(part.result) && part.result.some(isFileItem)

/** The tool message with its files as notes, and the user message carrying them; undefined without files. */
const liftMessage = (message: Prompt.ToolMessage): ReadonlyArray<Prompt.Message> | undefined => {
  if (!message.content.some(hasFiles)) return undefined
  const files: Array<Prompt.UserMessagePart> = []
  const content = message.content.map((part) => {
    if (!hasFiles(part)) return part
    const result = (part.result as ReadonlyArray<unknown>).map((item) => {
      if (!isFileItem(item)) return item
      const bytes = Encoding.decodeBase64(item.data)
      if (Either.isLeft(bytes)) return { type: "file", mediaType: item.mediaType, note: "not valid base64: dropped" }
      files.push(
        Prompt.makePart("text", { text: `File ${files.length / 2 + 1} of the "${part.name}" call ${part.id}:` })
      )
      files.push(Prompt.makePart("file", {
        mediaType: item.mediaType,
        data: bytes.right,
        ...(item.fileName === undefined ? {} : { fileName: item.fileName })
      }))
      return {
        type: "file",
        mediaType: item.mediaType,
        note: `sent in the user message after the tool results, as file ${files.length / 2}`
      }
    })
    return Prompt.makePart("tool-result", { ...part, result })
  })
  const tool = Prompt.makeMessage("tool", { content })
  return files.length === 0 ? [tool] : [tool, Prompt.makeMessage("user", { content: files })]
}

/** Each tool message lifted once (`null`: it holds no file). */
const lifted = identityMemo((message: Prompt.ToolMessage) => liftMessage(message) ?? null)

/**
 * How far each line of threads (see `fast/lineage.ts`) was lifted: for its
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
