/**
 * The checks a request passes before the inspector's routes see it, beside
 * the token: its `Host` must name this machine or an allowed name (against
 * DNS rebinding), a state-changing request's `Origin`, when sent, must be
 * the inspector's own (against cross-site requests), and its body is read
 * only up to a limit (a larger one is refused, never buffered).
 */
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import type * as Stream from "node:stream"

/** An IPv6 address in brackets (`[::1]`), as a URL or `Host` header writes it; any other name as it is. */
export const bracketed = (host: string): string => host.includes(":") && !host.startsWith("[") ? `[${host}]` : host

/** The name as a `Host` header carries it, in lower case. */
const hostName = (host: string) => bracketed(host).toLowerCase()

/** The names a `Host` header may carry: the loopback names, the bound address, and the `extra` ones. */
export const hostNames = (host: string, extra: ReadonlyArray<string>): ReadonlySet<string> =>
  new Set(["127.0.0.1", "localhost", "[::1]", host, ...extra].map(hostName))

const authority = /^(\[[0-9a-f:.]+\]|[a-z0-9.-]+)(?::\d{1,5})?$/

const name = /^(\[[0-9a-f:.]+\]|[a-z0-9.-]+)$/

/** Whether `host` is a host name or address without a port (`inspector.lan`, `10.0.0.5`, `::1`, `[::1]`). */
export const isHostName = (host: string): boolean => name.test(hostName(host))

/** Whether the `Host` header (name, then an optional port) names one of `names`. */
export const hostAllowed = (header: string | undefined, names: ReadonlySet<string>): boolean => {
  const match = header === undefined ? null : authority.exec(header.toLowerCase())
  return match !== null && names.has(match[1]!)
}

/** Methods that only read: every other one may change something (approve a call, resume a run). */
const reading = new Set(["GET", "HEAD", "OPTIONS"])

/**
 * Whether a request may go on as far as its origin goes: one that only reads
 * always may; one that changes state may when it sends no `Origin` (not a
 * browser's cross-site request) or the origin of the page the inspector
 * serves at `host` (the request's, already allowed, `Host` header).
 */
export const originAllowed = (
  method: string,
  origin: string | undefined,
  host: string | undefined
): boolean => {
  if (reading.has(method) || origin === undefined) return true
  const given = origin.toLowerCase()
  const own = (host ?? "").toLowerCase()
  return given === `http://${own}` || given === `https://${own}`
}

/** Whether the declared `Content-Length` is over `maxBytes`. */
export const declaredTooLarge = (contentLength: string | undefined, maxBytes: number): boolean =>
  contentLength !== undefined && Number(contentLength) > maxBytes

/**
 * Reads the whole body of a Node request, up to `maxBytes`: `None` as soon as
 * more arrived, leaving the rest to be drained (not kept) so the refusal
 * can still be answered on the connection.
 */
const readUpTo = (source: Stream.Readable, maxBytes: number): Effect.Effect<Option.Option<Buffer>, Error> =>
  Effect.async((resume) => {
    const chunks: Array<Buffer> = []
    let size = 0
    const stop = () => {
      source.off("data", onData)
      source.off("end", onEnd)
      source.off("error", onError)
    }
    function onData(chunk: Buffer) {
      size += chunk.length
      if (size <= maxBytes) return void chunks.push(chunk)
      stop()
      chunks.length = 0
      resume(Effect.succeed(Option.none()))
    }
    function onEnd() {
      stop()
      resume(Effect.succeed(Option.some(Buffer.concat(chunks))))
    }
    function onError(error: Error) {
      stop()
      resume(Effect.fail(error))
    }
    source.on("data", onData)
    source.once("end", onEnd)
    source.once("error", onError)
    return Effect.sync(stop)
  })

/**
 * The request with its body read, up to `maxBytes` (`None` when it was
 * larger). Requests that only read are passed on unread.
 */
export const bounded = (
  request: HttpServerRequest.HttpServerRequest,
  maxBytes: number
): Effect.Effect<Option.Option<HttpServerRequest.HttpServerRequest>, Error> =>
  reading.has(request.method)
    ? Effect.succeed(Option.some(request))
    : Effect.map(readUpTo(request.source as Stream.Readable, maxBytes), (body) =>
      Option.map(body, (bytes) =>
        HttpServerRequest.fromWeb(
          new Request(new URL(request.url, "http://inspector"), {
            method: request.method,
            headers: request.headers,
            body: bytes
          })
        )))
