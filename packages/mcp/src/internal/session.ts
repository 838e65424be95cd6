/**
 * The MCP SDK's client wrapped in Effect: one session with one server, its
 * transport, and what tells a call that its answer will never come.
 */
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js"
import { StreamableHTTPClientTransport, StreamableHTTPError } from "@modelcontextprotocol/sdk/client/streamableHttp.js"
import { InMemoryTransport } from "@modelcontextprotocol/sdk/inMemory.js"
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js"
import type { CallToolResult, Tool as McpToolDefinition } from "@modelcontextprotocol/sdk/types.js"
import {
  CallToolResultSchema,
  ErrorCode,
  isJSONRPCErrorResponse,
  isJSONRPCRequest,
  isJSONRPCResultResponse,
  McpError
} from "@modelcontextprotocol/sdk/types.js"
import * as Secrets from "@stepwise-agent/core/Secrets"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as FiberId from "effect/FiberId"
import * as Redacted from "effect/Redacted"
import type * as Scope from "effect/Scope"

/** A value given in plain text or as a `Redacted` secret. */
export type Secret = string | Redacted.Redacted<string>

/** Where the server is: a command to spawn, a URL, or a server object in this process. */
export type Target =
  | {
    readonly _tag: "Stdio"
    readonly command: string
    readonly args?: ReadonlyArray<string> | undefined
    readonly env?: Readonly<Record<string, Secret>> | undefined
    readonly cwd?: string | undefined
  }
  | {
    readonly _tag: "Http"
    readonly url: string | URL
    readonly headers?: Readonly<Record<string, Secret>> | undefined
  }
  | {
    readonly _tag: "InProcess"
    readonly server: { readonly connect: (transport: Transport) => Promise<void> }
  }

/** Why a session could not start, or a call lost its session; the text holds no credential. */
export interface Failure {
  readonly target: string
  readonly reason: string
}

/** What a call got: the server's result, or why there is none though the session lives. */
export type Answer =
  | { readonly _tag: "Result"; readonly result: CallToolResult }
  | { readonly _tag: "Failed"; readonly reason: string }

/**
 * A call sent: `answer` waits for what it got (interrupting it cancels the
 * request), `done` completes once the server is done with the request (its
 * answer came, even after the call was cancelled or timed out, or the
 * session ended), or at once when the request was never sent.
 */
export interface Call {
  readonly answer: Effect.Effect<Answer, string>
  readonly done: Deferred.Deferred<void>
}

/** A live session. */
export interface Session {
  readonly target: string
  readonly tools: ReadonlyArray<McpToolDefinition>
  /**
   * Calls a tool. Succeeds with the server's result, or with why there is
   * none though the session lives (a JSON-RPC error the server answered, the
   * SDK's request timeout, an answer that is no tool result); fails with the
   * reason when the session ended before the answer came.
   */
  readonly call: (name: string, args: unknown) => Effect.Effect<Answer, string>
  /** Sends a call (as {@link Session.call} does) and tells when the server is done with it. */
  readonly start: (name: string, args: unknown) => Effect.Effect<Call>
}

const reveal = (values: Readonly<Record<string, Secret>> | undefined): Record<string, string> => {
  const out: Record<string, string> = {}
  for (const [key, value] of Object.entries(values ?? {})) {
    out[key] = Redacted.isRedacted(value)
      ? Redacted.value(value)
      : value
  }
  return out
}

/** The URL as errors name it: no user info, query or fragment (they may hold credentials). */
export const describeUrl = (url: string | URL): string => {
  try {
    const parsed = new URL(url)
    return `${parsed.origin}${parsed.pathname}`
  } catch {
    return "<invalid URL>"
  }
}

/** How errors name the target. */
export const describeTarget = (target: Target): string => {
  switch (target._tag) {
    case "Stdio":
      // the command only: arguments often carry credentials (a connection string, --api-key=…)
      return target.command
    case "Http":
      return describeUrl(target.url)
    case "InProcess":
      return "in-process server"
  }
}

/** An error's message and its causes', scrubbed of credentials. */
export const reasonOf = (error: unknown): string => {
  const parts: Array<string> = []
  let current: unknown = Secrets.scrubError(error)
  for (let depth = 0; depth < 4 && current !== undefined && current !== null; depth++) {
    const text = current instanceof Error ? current.message : String(current)
    if (text !== "" && !parts.includes(text)) parts.push(text)
    current = current instanceof Error ? current.cause : undefined
  }
  return Secrets.scrubText(parts.join(": ") || "unknown error")
}

/** The credentials a target sends: its `Redacted` values and its headers named like credentials. */
const credentialsOf = (target: Target): Array<Secret> => {
  if (target._tag === "InProcess") return []
  const values = Object.entries((target._tag === "Http" ? target.headers : target.env) ?? {})
  return values
    .filter(([name, value]) => Redacted.isRedacted(value) || (target._tag === "Http" && Secrets.isCredentialName(name)))
    .map(([, value]) => value)
}

/** A failed result as the model reads it: its content scrubbed of credentials. */
const scrubFailed = (result: CallToolResult): CallToolResult =>
  result.isError === true ? { ...result, content: Secrets.scrubError(result.content) } : result

/** The most bytes of one message a server may send, as the SDK's stdio transport allows (10 MiB). */
export const maxMessageBytes = 10 * 1024 * 1024

/**
 * Counts the bytes of the message being received: of the whole body, or (`streamed`) of the current
 * server-sent event (its line ends not counted), which ends at a blank line. Gives the problem once a message
 * passes `max`.
 */
export const messageCounter = (streamed: boolean, max = maxMessageBytes) => {
  let bytes = 0
  let line = 0
  let afterCarriageReturn = false
  const problem = `the server sent ${streamed ? "an event" : "an answer"} of over ${max} bytes`
  return (chunk: Uint8Array): string | undefined => {
    if (!streamed) {
      bytes += chunk.length
      return bytes > max ? problem : undefined
    }
    for (const byte of chunk) {
      if (byte === 10 && afterCarriageReturn) afterCarriageReturn = false
      else if (byte === 10 || byte === 13) {
        afterCarriageReturn = byte === 13
        // a blank line ends the event
        if (line === 0) bytes = 0
        line = 0
      } else {
        afterCarriageReturn = false
        line++
        if (++bytes > max) return problem
      }
    }
    return undefined
  }
}

/**
 * A fetch whose answers are bounded and whose streamed POST answers report a
 * broken connection. The SDK only logs a response stream cut before the
 * answer (the server died mid-call) and leaves the call waiting for its
 * timeout; and it keeps an event (or an answer) however long it grows, so a
 * server sending one that never ends filled memory until the timeout.
 */
const watchingFetch = (onBroken: (error: unknown) => void): typeof fetch => async (input, init) => {
  const response = await fetch(input, init)
  const streamed = response.headers.get("content-type")?.startsWith("text/event-stream") === true
  if (response.body === null) return response
  // (a GET's stream carries no answer: only a POST's breaks the calls waiting)
  const post = init?.method === "POST"
  const signal = init?.signal
  const reader = response.body.getReader()
  const count = messageCounter(streamed)
  const body = new ReadableStream<Uint8Array>({
    pull: (controller) =>
      reader.read().then(
        ({ done, value }) => {
          if (done) return controller.close()
          const problem = count(value)
          if (problem === undefined) return controller.enqueue(value)
          const error = new Error(problem)
          reader.cancel(error).catch(() => undefined)
          if (post) onBroken(error)
          controller.error(error)
        },
        (error) => {
          if (signal?.aborted !== true && post && streamed) onBroken(error)
          controller.error(error)
        }
      ),
    cancel: (reason) => reader.cancel(reason)
  })
  return new Response(body, { status: response.status, statusText: response.statusText, headers: response.headers })
}

/**
 * Whether a call failed for want of a session: the connection closed, the
 * transport is gone, or the HTTP request could not be made or was refused.
 * Other failures (a JSON-RPC error, an answer that is no tool result) are
 * answers the model reads.
 */
const isConnectionLost = (error: unknown) =>
  error instanceof McpError
    ? error.code === ErrorCode.ConnectionClosed
    : error instanceof StreamableHTTPError || error instanceof TypeError || isNotConnected(error)

/** The SDK's error for a request made after the transport closed. */
const isNotConnected = (error: unknown) => error instanceof Error && error.message === "Not connected"

/** The content block types of this SDK's protocol version; a newer server may send others. */
const knownBlocks: ReadonlySet<unknown> = new Set(["text", "image", "audio", "resource_link", "resource"])

/**
 * The SDK's tool result schema, save that a block of a type it does not
 * know (a newer protocol's, or a server's own) is kept as sent instead of
 * failing the whole result; the rest is checked as the SDK checks it. The
 * SDK takes any schema with a `safeParse`.
 */
const resultSchema = {
  safeParse: (data: unknown) => {
    const strict = CallToolResultSchema.safeParse(data)
    const content: unknown = typeof data === "object" && data !== null ? (data as { content?: unknown }).content : []
    if (strict.success || !Array.isArray(content)) return strict
    const isOther = (block: unknown) =>
      typeof block === "object" && block !== null && typeof (block as { type?: unknown }).type === "string" &&
      !knownBlocks.has((block as { type: string }).type)
    if (!content.some(isOther)) return strict
    const rest = CallToolResultSchema.safeParse({ ...(data as object), content: content.filter((b) => !isOther(b)) })
    return rest.success ? { success: true as const, data: { ...rest.data, content } } : rest
  }
} as unknown as typeof CallToolResultSchema

/** The most tools a server may list (and pages it may list them in): far more than a model can choose from. */
export const maxTools = 10_000

/**
 * Connects to a server and lists its tools; the session is closed when the
 * scope closes (for HTTP, a DELETE ends the server's session first).
 */
export const connect = (
  target: Target,
  options: { readonly timeoutMillis: number | undefined }
): Effect.Effect<Session, Failure, Scope.Scope> =>
  Effect.gen(function*() {
    const described = describeTarget(target)
    // what the server echoes of them in an error is scrubbed, wherever it is written
    yield* Secrets.register(...credentialsOf(target))
    // The calls the server works on, by request id, until its answer comes: the SDK forgets a request it
    // cancelled (on interruption or its timeout) and drops the answer, though the server may still run it.
    const working = new Map<string | number, Deferred.Deferred<void>>()
    const settle = (id: string | number) => {
      const done = working.get(id)
      if (done === undefined) return
      working.delete(id)
      Deferred.unsafeDone(done, Effect.void)
    }
    const settleAll = () => [...working.keys()].forEach(settle)
    // The calls in flight wait on the current deferred; a transport that breaks fails it and starts another.
    let lost = yield* Deferred.make<never, string>()
    const breakCalls = (reason: string) => {
      settleAll()
      const current = lost
      lost = Deferred.unsafeMake(FiberId.none)
      Deferred.unsafeDone(current, Effect.fail(reason))
    }
    let transport: Transport
    let serverTransport: Transport | undefined
    switch (target._tag) {
      case "Stdio": {
        transport = new StdioClientTransport({
          command: target.command,
          args: [...(target.args ?? [])],
          env: reveal(target.env),
          ...(target.cwd === undefined ? {} : { cwd: target.cwd })
        })
        break
      }
      case "Http": {
        transport = new StreamableHTTPClientTransport(new URL(target.url), {
          requestInit: { headers: reveal(target.headers) },
          fetch: watchingFetch((error) =>
            breakCalls(`the connection to ${described} broke before the answer came (${reasonOf(error)})`)
          ),
          reconnectionOptions: {
            initialReconnectionDelay: 1000,
            maxReconnectionDelay: 30000,
            reconnectionDelayGrowFactor: 1.5,
            maxRetries: 0
          }
        })
        break
      }
      case "InProcess": {
        const [client, server] = InMemoryTransport.createLinkedPair()
        transport = client
        serverTransport = server
      }
    }
    const client = new Client({ name: "stepwise-agent", version: "0.1.0" })
    const requestOptions = options.timeoutMillis === undefined ? {} : { timeout: options.timeoutMillis }
    const fail = (error: unknown): Failure => ({ target: described, reason: reasonOf(error) })
    const close = Effect.promise(async () => {
      if (transport instanceof StreamableHTTPClientTransport) {
        // a server that does not answer the DELETE does not hold up the release
        await Promise.race([
          transport.terminateSession().catch(() => undefined),
          new Promise((resolve) => setTimeout(resolve, 5000).unref())
        ])
      }
      await client.close().catch(() => undefined)
    })
    yield* Effect.acquireRelease(
      Effect.tryPromise({
        try: async (signal) => {
          if (target._tag === "InProcess") await target.server.connect(serverTransport!)
          await client.connect(transport, { ...requestOptions, signal })
        },
        catch: fail
      }).pipe(
        // a stream the SDK only logs as broken (an event over the bound) fails the connection at once
        Effect.raceFirst(Effect.mapError(Deferred.await(lost), (reason): Failure => ({ target: described, reason }))),
        // (the acquisition is uninterruptible, and so would be the race's loser)
        Effect.interruptible,
        Effect.onError(() => close)
      ),
      () => close
    )
    // the id of the call being sent: the SDK sends a request before callTool returns its promise
    let onSent: ((id: string | number) => void) | undefined
    const send = transport.send.bind(transport)
    transport.send = (message, sendOptions) => {
      const id = isJSONRPCRequest(message) && message.method === "tools/call" ? message.id : undefined
      if (id === undefined) return send(message, sendOptions)
      onSent?.(id)
      return send(message, sendOptions).catch((error: unknown) => {
        settle(id)
        throw error
      })
    }
    const receive = transport.onmessage
    transport.onmessage = (message, extra) => {
      if (isJSONRPCResultResponse(message) || isJSONRPCErrorResponse(message)) {
        if (message.id !== undefined) settle(message.id)
      }
      receive?.call(transport, message, extra)
    }
    const closed = target._tag === "Stdio" ? "the server process exited" : `the session with ${described} closed`
    client.onclose = () => {
      settleAll()
      breakCalls(closed)
    }
    const tools: Array<McpToolDefinition> = []
    // a list that never ends (a cursor given again, or pages without end) fails instead of growing forever
    const cursors = new Set<string>()
    let cursor: string | undefined
    do {
      const page = yield* Effect.tryPromise({
        try: (signal) => client.listTools(cursor === undefined ? {} : { cursor }, { ...requestOptions, signal }),
        catch: fail
      })
      tools.push(...page.tools)
      cursor = page.nextCursor
      if (cursor !== undefined && cursors.has(cursor)) {
        return yield* Effect.fail<Failure>({
          target: described,
          reason: "the tool list does not end: a page cursor came twice"
        })
      }
      if (tools.length > maxTools || cursors.size >= maxTools) {
        return yield* Effect.fail<Failure>({
          target: described,
          reason: `the server lists more than ${maxTools} tools`
        })
      }
      if (cursor !== undefined) cursors.add(cursor)
    } while (cursor !== undefined)

    const start: Session["start"] = (name, args) =>
      Effect.sync(() => {
        const controller = new AbortController()
        const done = Deferred.unsafeMake<void>(FiberId.none)
        let sent = false
        onSent = (id) => {
          sent = true
          working.set(id, done)
        }
        let promise: Promise<CallToolResult>
        try {
          promise = client.callTool(
            { name, arguments: args as Record<string, unknown> },
            resultSchema,
            { ...requestOptions, signal: controller.signal }
          ) as Promise<CallToolResult>
        } finally {
          onSent = undefined
        }
        if (!sent) Deferred.unsafeDone(done, Effect.void)
        // the answer of a call interrupted before it is awaited is nobody's
        promise.catch(() => undefined)
        const answer = Effect.raceFirst(
          Deferred.await(lost),
          Effect.tryPromise({ try: () => promise, catch: (error) => error }).pipe(
            // interrupted: the SDK tells the server the request is cancelled
            Effect.onInterrupt(() => Effect.sync(() => controller.abort())),
            Effect.map((result): Answer => ({ _tag: "Result", result: scrubFailed(result) })),
            Effect.catchAll((error) =>
              !isConnectionLost(error)
                ? Effect.succeed<Answer>({ _tag: "Failed", reason: reasonOf(error) })
                : Effect.fail(
                  error instanceof McpError || isNotConnected(error)
                    ? closed
                    : `the request to ${described} failed (${reasonOf(error)})`
                )
            )
          )
        )
        return { answer, done }
      })
    const call: Session["call"] = (name, args) => Effect.flatMap(start(name, args), ({ answer }) => answer)
    return { target: described, tools, call, start }
  })
