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

/**
 * The tool message with its files as notes, and the user message carrying them; undefined without files. A
 * thread is lifted message by message (`fast/liftedThreads.ts`).
 */
export const liftMessage = (message: Prompt.ToolMessage): ReadonlyArray<Prompt.Message> | undefined => {
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
