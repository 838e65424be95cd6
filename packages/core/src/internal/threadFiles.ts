/**
 * The names of the file-system checkpointer's files of a thread: `<name>.json`
 * (its head), `<name>.json.<uuid>.tmp` (a head being written),
 * `<name>.<generation>.log`, `<name>.lock` and `<name>.lock.break`.
 *
 * `<name>` is the thread id URI-encoded, as every version wrote it, when that
 * leaves room for the longest suffix in a file name of 255 bytes (the limit of
 * common file systems): 209 characters at most. A longer one (a long id, or
 * one of many non-ASCII characters, 9 or 12 characters each) is its first 64
 * characters, `#` (which URI-encoding never leaves: no short name has it) and
 * the SHA-256 of the id's UTF-8 in hex: 129 characters whatever the id's
 * length. A thread of such a name also has `<name>.id` (written atomically,
 * before its first head), its id, from which listing gives the id back.
 */
import * as PlatformError from "@effect/platform/Error"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"

/** The longest suffix of a thread's file: `.json.<uuid>.tmp`. */
const longestSuffix = ".json.".length + 36 + ".tmp".length

/** The longest URI-encoded id kept as the name: 255 bytes less the longest suffix. */
const maxEncodedName = 255 - longestSuffix

/** The characters of a URI-encoded id that start a hashed name. */
const keptOfLong = 64

/** The name of a thread's files; `hashed` when the id is kept in `<name>.id`. */
export interface Name {
  readonly name: string
  readonly hashed: boolean
}

/** A lone surrogate (half of a UTF-16 pair): it has no UTF-8, so no file name. */
const loneSurrogate = /\p{Cs}/u

const textEncoder = new TextEncoder()

const sha256Hex = (text: string) =>
  Effect.map(
    Effect.promise(() => crypto.subtle.digest("SHA-256", textEncoder.encode(text))),
    (digest) => Array.from(new Uint8Array(digest), (byte) => byte.toString(16).padStart(2, "0")).join("")
  )

/**
 * The name of the files of `threadId`. Fails with `BadArgument` for an id with a lone surrogate, which has no
 * file name (the agent refuses such an id before it reaches a checkpointer).
 */
export const nameOf = (threadId: string): Effect.Effect<Name, PlatformError.BadArgument> => {
  if (loneSurrogate.test(threadId)) {
    return Effect.fail(
      new PlatformError.BadArgument({
        module: "FileSystem",
        method: "threadFileName",
        description: "a thread id with a lone surrogate has no file name"
      })
    )
  }
  const encoded = encodeURIComponent(threadId)
  return encoded.length <= maxEncodedName
    ? Effect.succeed({ name: encoded, hashed: false })
    : Effect.map(sha256Hex(threadId), (hash) => ({ name: `${encoded.slice(0, keptOfLong)}#${hash}`, hashed: true }))
}

/**
 * The thread id whose files are named `name` (a head's file name less `.json`): decoded, or, for a hashed name,
 * what `readId` reads from `<name>.id`. None when that id's files are not named `name`: a file this checkpointer
 * did not write, or an `.id` file gone (the thread is being deleted).
 */
export const threadIdOf = <E, R>(
  name: string,
  readId: Effect.Effect<Option.Option<string>, E, R>
): Effect.Effect<Option.Option<string>, E, R> => {
  let id: Effect.Effect<Option.Option<string>, E, R>
  if (name.includes("#")) {
    id = readId
  } else {
    try {
      id = Effect.succeedSome(decodeURIComponent(name))
    } catch {
      return Effect.succeedNone // not a name this checkpointer wrote
    }
  }
  return Effect.flatMap(id, (found) =>
    Option.isNone(found)
      ? Effect.succeedNone
      : nameOf(found.value).pipe(
        Effect.map((own) => own.name === name ? found : Option.none()),
        Effect.orElseSucceed(() => Option.none<string>())
      ))
}

/**
 * Whether a file named `<name>.<rest>` is one of thread `name`'s that its delete removes after its head: a log,
 * a head being written, its `.id` (or one being written). Never its lock file (`lock`, `lock.break`): the delete
 * holds it, and its holder removes it.
 */
export const isRemovedAfterHead = (rest: string): boolean =>
  /^(?:[0-9a-f-]{36}\.log|json\.[0-9a-f-]{36}\.tmp|id|id\.[0-9a-f-]{36}\.tmp)$/.test(rest)
