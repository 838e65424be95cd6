/**
 * The checks a request passes before the inspector's routes see it, beside
 * the token: its `Host` must name this machine or an allowed name (against
 * DNS rebinding), a state-changing request's `Origin`, when sent, must be
 * the inspector's own (against cross-site requests), and its body is read
 * only up to a limit (a larger one is refused, never buffered) and a
 * deadline (a body still coming then is refused). An answer given before
 * the body was read whole closes the connection (core's `HttpConnection`).
 */
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as Effect from "effect/Effect"
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
 * Reads the whole body of a Node request, up to `maxBytes` and within
 * `timeoutMillis`: `"TooLarge"` as soon as more arrived, `"Late"` when it
 * had not all arrived by then. The rest is left to be drained (not kept):
 * the stream is not destroyed, which would destroy the connection before
 * the refusal is answered on it.
 */
const readUpTo = (
  source: Stream.Readable,
  maxBytes: number,
  timeoutMillis: number
): Effect.Effect<Buffer | "TooLarge" | "Late", Error> =>
  Effect.async((resume) => {
    const chunks: Array<Buffer> = []
    let size = 0
    const stop = () => {
      clearTimeout(deadline)
      source.off("data", onData)
      source.off("end", onEnd)
      source.off("error", onError)
      chunks.length = 0
    }
    function onData(chunk: Buffer) {
      size += chunk.length
      if (size <= maxBytes) return void chunks.push(chunk)
      stop()
      resume(Effect.succeed("TooLarge"))
    }
    function onEnd() {
      const body = Buffer.concat(chunks)
      stop()
      resume(Effect.succeed(body))
    }
    function onError(error: Error) {
      stop()
      resume(Effect.fail(error))
    }
    const deadline = setTimeout(() => {
      stop()
      resume(Effect.succeed("Late"))
    }, timeoutMillis)
    source.on("data", onData)
    source.once("end", onEnd)
    source.once("error", onError)
    return Effect.sync(stop)
  })

/**
 * A request's body as {@link bounded} read it: `"Read"`, whole, in the
 * request given on; `"Unread"`, a request that only reads, given on as it
 * came; `"TooLarge"`, over the limit; `"Late"`, not all there by the
 * deadline.
 */
export type Bounded =
  | { readonly _tag: "Read"; readonly request: HttpServerRequest.HttpServerRequest }
  | { readonly _tag: "Unread"; readonly request: HttpServerRequest.HttpServerRequest }
  | { readonly _tag: "TooLarge" }
  | { readonly _tag: "Late" }

/**
 * The request with its body read, up to `maxBytes` and within
 * `timeoutMillis`. Requests that only read are passed on unread.
 */
export const bounded = (
  request: HttpServerRequest.HttpServerRequest,
  maxBytes: number,
  timeoutMillis: number
): Effect.Effect<Bounded, Error> =>
  reading.has(request.method)
    ? Effect.succeed({ _tag: "Unread", request })
    : Effect.map(readUpTo(request.source as Stream.Readable, maxBytes, timeoutMillis), (body): Bounded =>
      typeof body === "string" ? { _tag: body } : {
        _tag: "Read",
        request: HttpServerRequest.fromWeb(
          new Request(new URL(request.url, "http://inspector"), {
            method: request.method,
            headers: request.headers,
            body
          })
        )
      })
