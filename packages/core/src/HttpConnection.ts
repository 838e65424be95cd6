/**
 * The connection an HTTP request came on, for `@effect/platform` handlers
 * that may answer before they read a request's body (a 413, a 415, a 408):
 * such an answer closes the connection ({@link closeUnlessRead}), since the
 * unread rest of the body would be taken for the next request, and
 * {@link guard} lets no later request on that connection reach the handler
 * (RFC 9112 §9.6). Node's server parses and hands over a request that came
 * on the same connection (pipelined, or written by a client that did not
 * wait for the answer) even when an earlier answer closes it: without the
 * guard, a refused request followed by a valid one would run the valid one,
 * whose answer is never sent.
 *
 * `UiMessageStream.toHttpApp`, `UiMessageStream.messagesHttpApp` and the
 * inspector use it. On a server whose requests carry no Node socket (not
 * `@effect/platform-node`'s), {@link guard} runs every request as it comes:
 * that server decides itself what happens to the requests that follow an
 * answer with `Connection: close`.
 *
 * @since 0.1.0
 */
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Predicate from "effect/Predicate"

/**
 * Whether the request has no body to read: it declares none (no
 * `Transfer-Encoding`, no `Content-Length` or a length of 0).
 *
 * @example
 * ```ts
 * import { HttpServerRequest, HttpServerResponse } from "@effect/platform"
 * import { HttpConnection } from "@stepwise-agent/core"
 * import { Effect } from "effect"
 *
 * // a route that never reads a body closes the connection of a request that sends one
 * const route = Effect.map(HttpServerRequest.HttpServerRequest, (request) =>
 *   HttpConnection.closeUnlessRead(HttpServerResponse.text("ok"), HttpConnection.hasNoBody(request)))
 * ```
 *
 * @since 0.1.0
 * @category accessors
 */
export const hasNoBody = (request: HttpServerRequest.HttpServerRequest): boolean => {
  const length = request.headers["content-length"]
  return request.headers["transfer-encoding"] === undefined && (length === undefined || /^\s*0+\s*$/.test(length))
}

/**
 * `response`, closing the connection after it (`Connection: close`) unless
 * the request's body was read whole (`bodyRead`). An answer given before
 * the body is all read leaves the rest unread on the connection, which then
 * cannot carry another request: Node would wait for that rest (a slow
 * client holds the socket until the server's `requestTimeout`). Give the
 * handler to {@link guard} too, so that no later request on the closed
 * connection reaches it.
 *
 * @example
 * ```ts
 * import { HttpServerResponse } from "@effect/platform"
 * import { HttpConnection } from "@stepwise-agent/core"
 *
 * // refused before the body was read: the connection closes after the answer
 * const refused = HttpConnection.closeUnlessRead(HttpServerResponse.text("Too large", { status: 413 }), false)
 * ```
 *
 * @since 0.1.0
 * @category combinators
 */
export const closeUnlessRead = (
  response: HttpServerResponse.HttpServerResponse,
  bodyRead: boolean
): HttpServerResponse.HttpServerResponse =>
  bodyRead ? response : HttpServerResponse.setHeader(response, "connection", "close")

/** What {@link guard} uses of a Node socket (`net.Socket`), so that this module names nothing of Node. */
interface Socket {
  readonly destroyed: boolean
  readonly writableEnded: boolean
  readonly writableFinished: boolean
  readonly destroy: () => void
  readonly once: (event: "close", listener: () => void) => unknown
  readonly off: (event: "close", listener: () => void) => unknown
}

/** The Node socket under `request` (its `IncomingMessage`'s), or `undefined` on a server that is not Node's. */
const socketOf = (request: HttpServerRequest.HttpServerRequest): Socket | undefined => {
  const source: unknown = request.source
  const socket: unknown = Predicate.hasProperty(source, "socket") ? source.socket : undefined
  return Predicate.hasProperty(socket, "destroyed") && typeof socket.destroyed === "boolean" &&
      Predicate.hasProperty(socket, "writableEnded") && typeof socket.writableEnded === "boolean" &&
      Predicate.hasProperty(socket, "writableFinished") && typeof socket.writableFinished === "boolean" &&
      Predicate.hasProperty(socket, "destroy") && Predicate.isFunction(socket.destroy) &&
      Predicate.hasProperty(socket, "once") && Predicate.isFunction(socket.once) &&
      Predicate.hasProperty(socket, "off") && Predicate.isFunction(socket.off)
    ? socket as Socket
    : undefined
}

/** The guarded requests of one connection: whether one was answered with `Connection: close`, and the last one. */
interface Turns {
  closing: boolean
  last: Deferred.Deferred<void> | undefined
}

/**
 * The turns of each connection a guarded handler saw, by socket (forgotten with it). Not a speed trick: the
 * socket is Node's, and the only value the requests of one connection share.
 */
const connections = new WeakMap<Socket, Turns>()

/** Whether `response` closes its connection (`Connection: close`). */
const closes = (response: HttpServerResponse.HttpServerResponse): boolean =>
  /(?:^|,)\s*close\s*(?:,|$)/i.test(response.headers["connection"] ?? "")

/**
 * A request dropped: waits until the connection is closed (Node closes it once the earlier answer, with
 * `Connection: close`, is written: destroying it sooner could cut that answer off), then gives an answer that
 * goes nowhere.
 */
const dropped = (socket: Socket) =>
  Effect.async<HttpServerResponse.HttpServerResponse>((resume) => {
    const onClose = () => resume(Effect.succeed(HttpServerResponse.empty({ status: 503 })))
    if (socket.destroyed) return onClose()
    socket.once("close", onClose)
    // the earlier answer is all written: Node is closing the connection; hasten it
    if (socket.writableFinished) socket.destroy()
    return Effect.sync(() => socket.off("close", onClose))
  })

/**
 * `handler`, run for a request only once the earlier requests of its
 * connection that went through `guard` have their answers, and only if none
 * of them closes the connection (`Connection: close`, as
 * {@link closeUnlessRead} sets it) and the server is not already closing it:
 * otherwise the request is dropped before `handler` starts, and the
 * connection closes after the earlier answer. A request that came after a
 * refused one on the same connection (pipelined, or sent without waiting
 * for the answer) so never runs: its answer could not be sent.
 *
 * Requests of one connection are answered in order anyway (HTTP/1.1), so
 * waiting for the earlier handlers delays no answer, only the start of the
 * work. Requests reach `guard` in the order their handlers start: a route
 * whose own middleware waits before `guard` may let a later request in
 * first. On a server whose requests carry no Node socket, `handler` runs
 * as it comes.
 *
 * @example
 * ```ts
 * import { HttpRouter, HttpServerRequest, HttpServerResponse } from "@effect/platform"
 * import { HttpConnection } from "@stepwise-agent/core"
 * import { Effect } from "effect"
 *
 * // a route that refuses a body it does not want before reading it
 * const upload = HttpConnection.guard(
 *   Effect.map(HttpServerRequest.HttpServerRequest, (request) =>
 *     request.headers["content-type"] === "application/json"
 *       ? HttpServerResponse.text("accepted")
 *       : HttpConnection.closeUnlessRead(HttpServerResponse.text("JSON only", { status: 415 }), false))
 * )
 * const router = HttpRouter.empty.pipe(HttpRouter.post("/upload", upload))
 * ```
 *
 * @since 0.1.0
 * @category combinators
 */
export const guard = <E, R>(
  handler: Effect.Effect<HttpServerResponse.HttpServerResponse, E, R>
): Effect.Effect<HttpServerResponse.HttpServerResponse, E, R | HttpServerRequest.HttpServerRequest> =>
  Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) => {
    const socket = socketOf(request)
    if (socket === undefined) return handler
    return Effect.uninterruptibleMask((restore) =>
      Effect.flatMap(Deferred.make<void>(), (done) => {
        // taking the turn is synchronous: the next request of the connection waits for this one
        let turns = connections.get(socket)
        if (turns === undefined) connections.set(socket, turns = { closing: false, last: undefined })
        const before = turns.last
        turns.last = done
        const own = turns
        return Effect.gen(function*() {
          if (before !== undefined) yield* restore(Deferred.await(before))
          if (own.closing || socket.destroyed || socket.writableEnded) return yield* restore(dropped(socket))
          const response = yield* restore(handler)
          if (closes(response)) own.closing = true
          return response
        }).pipe(Effect.ensuring(Deferred.succeed(done, undefined)))
      })
    )
  })
