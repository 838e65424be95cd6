/**
 * A raw HTTP/1.1 client on `node:net`, for tests of what a server does on the
 * wire: partial bodies, slow clients, and several requests on one connection.
 * Shared by the core and inspector tests (the inspector's test project
 * includes this folder).
 */
import { Effect } from "effect"
import * as Net from "node:net"

/** What a raw client saw. */
export interface Seen {
  /** The first final answer's status (not a `100 Continue`), if one came. */
  readonly status: number | undefined
  /** The first final answer's status line and headers, in lower case. */
  readonly head: string
  /** Everything that came, as latin1. */
  readonly text: string
  /** How many final answers came (status lines, not 1xx). */
  readonly answers: number
  /** Whether the server closed the connection (before `until` held or the client gave up). */
  readonly closed: boolean
}

/** Options of {@link exchange}. */
export interface ExchangeOptions {
  /** Milliseconds between two writes (default 50): each write is its own TCP segment. */
  readonly gapMs?: number | undefined
  /**
   * After the writes, a space every 200 ms, as a slow client still sending a body does (so that no idle
   * timeout of the server closes the connection). Only for a body left unfinished: after a whole request
   * a space would start a malformed one.
   */
  readonly trickle?: boolean | undefined
  /** Gives what came as soon as this holds of it (the connection still open). */
  readonly until?: ((received: string) => boolean) | undefined
  /** Gives up after this many milliseconds (default 10 s). */
  readonly giveUpMs?: number | undefined
}

/**
 * The status lines of final answers (not `100 Continue`) in a text: one per answer. Anywhere, since an answer
 * follows the body of the one before it directly (the bodies of the tests' answers do not quote one).
 */
const statusLine = /HTTP\/1\.1 ([2-5]\d{2})[^\r\n]*\r\n/g

/**
 * Connects to `port` on 127.0.0.1 and sends each of `writes` in turn, `gapMs` apart (a whole request, two
 * pipelined requests in one write, or a head and part of a body); gives what came once the server closed the
 * connection, `until` held, or after `giveUpMs`.
 */
export const exchange = (port: number, writes: ReadonlyArray<string | Buffer>, options?: ExchangeOptions) =>
  Effect.async<Seen>((resume) => {
    const socket = Net.connect(port, "127.0.0.1")
    socket.setNoDelay(true)
    let received = ""
    let done = false
    const finish = (closed: boolean) => {
      if (done) return
      done = true
      clearTimeout(giveUp)
      clearInterval(writing)
      clearInterval(trickle)
      socket.destroy()
      const answers = [...received.matchAll(statusLine)]
      const first = answers[0]
      resume(Effect.succeed({
        status: first === undefined ? undefined : Number(first[1]),
        head: first === undefined ? "" : received.slice(first.index).split("\r\n\r\n", 1)[0]!.toLowerCase(),
        text: received,
        answers: answers.length,
        closed
      }))
    }
    socket.setEncoding("latin1")
    socket.on("data", (data: string) => {
      received += data
      if (options?.until?.(received)) finish(false)
    })
    socket.on("end", () => finish(true))
    socket.on("close", () => finish(true))
    // the server closes while this client still sends: a reset after the answer is a close
    socket.on("error", () => finish(true))
    const slowly = () => options?.trickle ? setInterval(() => socket.destroyed || socket.write(" "), 200) : undefined
    socket.write(writes[0] ?? "")
    let trickle = writes.length <= 1 ? slowly() : undefined
    let next = 1
    const writing = setInterval(() => {
      const data = writes[next++]
      if (data === undefined) {
        clearInterval(writing)
        trickle ??= slowly()
      } else if (!socket.destroyed) socket.write(data)
    }, options?.gapMs ?? 50)
    // generous: the servers tested close at once
    const giveUp = setTimeout(() => finish(false), options?.giveUpMs ?? 10_000)
    return Effect.sync(() => finish(false))
  })

/**
 * A raw client that sends `head` (the request line and headers, without the blank line) and `body` (part of
 * the body the head declares), then a space every 200 ms, as a slow client does. Gives what came once the
 * server closed the connection, or after 10 s.
 */
export const partialRequest = (port: number, head: string, body: string | Buffer) =>
  exchange(port, [Buffer.concat([Buffer.from(`${head}\r\n\r\n`, "latin1"), Buffer.from(body)])], { trickle: true })

/** A whole request: `head` (request line and headers, without the blank line), a Content-Length, and `body`. */
export const wholeRequest = (head: string, body: string): string =>
  `${head}\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`
