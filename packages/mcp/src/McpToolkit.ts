/**
 * The tools of an MCP (Model Context Protocol) server as a toolkit the agent
 * uses like any other: a server spawned as a child process (stdio), reached
 * over streamable HTTP, or running in this process. Each tool keeps the
 * server's name, description and input JSON schema (the model sees exactly
 * what the server declares); its results and errors become tool results the
 * model can read. The session is a scoped resource: it closes with its scope
 * or Layer (the child process exits; an HTTP session is ended with a DELETE).
 *
 * Built on the official `@modelcontextprotocol/sdk` client.
 *
 * @since 0.1.0
 */
import * as Tool from "@effect/ai/Tool"
import type * as Toolkit from "@effect/ai/Toolkit"
import type { Transport as McpTransport } from "@modelcontextprotocol/sdk/shared/transport.js"
import type { CallToolResult, Tool as McpToolDefinition } from "@modelcontextprotocol/sdk/types.js"
import * as AgentError from "@stepwise-agent/core/AgentError"
import * as Secrets from "@stepwise-agent/core/Secrets"
import * as ToolName from "@stepwise-agent/core/ToolName"
import * as Context from "effect/Context"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Predicate from "effect/Predicate"
import * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"
import type * as Scope from "effect/Scope"
import { keysOf, unknownKey } from "./internal/options.js"
import * as Session from "./internal/session.js"

// =============================================================================
// Models
// =============================================================================

/**
 * A server spawned as a child process, spoken to over its stdin and stdout.
 * The child gets a minimal environment (`HOME`, `PATH`, `SHELL`, `TERM`,
 * `USER`, `LOGNAME`) plus `env`; its stderr is the parent's.
 *
 * @since 0.1.0
 * @category models
 */
export interface StdioTransport {
  readonly _tag: "Stdio"
  readonly command: string
  readonly args?: ReadonlyArray<string> | undefined
  /** Variables added to the child's environment; secrets may be `Redacted`. */
  readonly env?: Readonly<Record<string, string | Redacted.Redacted<string>>> | undefined
  readonly cwd?: string | undefined
}

/**
 * A server reached over the streamable HTTP transport. `headers` (e.g.
 * `Authorization`) go with every request and appear in no error, log or
 * span; errors name the URL without its user info, query or fragment.
 *
 * @since 0.1.0
 * @category models
 */
export interface HttpTransport {
  readonly _tag: "Http"
  readonly url: string | URL
  readonly headers?: Readonly<Record<string, string | Redacted.Redacted<string>>> | undefined
}

/**
 * A server object in this process, such as the SDK's `McpServer`, connected
 * through the SDK's in-memory transport: for tests, examples, and tools an
 * app serves to its own agent as it serves them to other MCP clients.
 *
 * @since 0.1.0
 * @category models
 */
export interface InProcessTransport {
  readonly _tag: "InProcess"
  readonly server: {
    readonly connect: (transport: McpTransport) => Promise<void>
  }
}

/**
 * How to reach the server.
 *
 * @since 0.1.0
 * @category models
 */
export type Transport = StdioTransport | HttpTransport | InProcessTransport

/**
 * Options of {@link make} and {@link layer}.
 *
 * @since 0.1.0
 * @category models
 */
export interface Options {
  /** The server's name in errors and spans. */
  readonly name: string
  readonly transport: Transport
  /**
   * The longest one request may wait for its answer — the handshake, listing
   * the tools, a tool call (default: the SDK's 60 seconds). A call past it
   * gets a failed tool result saying it timed out.
   */
  readonly timeout?: Duration.DurationInput | undefined
  /**
   * How many calls of the server's tools that may change something run at
   * once (default 1: one at a time, as most servers keep state without
   * locks). A tool the server marks read-only (`readOnlyHint: true`, and not
   * `destructiveHint: true` as well) is not counted: its calls run as the
   * agent runs them, in parallel. A call cancelled (interrupted, e.g. by the
   * agent's `toolTimeout`, or past `timeout`) keeps its place until the
   * server answers it, the session ends, or `timeout` (default 60 seconds)
   * has passed once more: a server may go on with a cancelled request.
   */
  readonly concurrency?: number | "unbounded" | undefined
}

/**
 * The parameters of every MCP tool: any JSON object, described to the model
 * by the server's input JSON schema. The server validates the arguments;
 * invalid ones come back as a failed tool result the model can repair.
 *
 * @since 0.1.0
 * @category models
 */
export const Arguments = Schema.Struct({}, Schema.Record({ key: Schema.String, value: Schema.Unknown }))

// =============================================================================
// Errors
// =============================================================================

/**
 * Why a session with an MCP server failed ({@link McpError}):
 *
 * - `"ConnectFailed"`: the session could not start: the command could not be
 *   spawned or exited, the URL refused the connection or answered with an
 *   error, the handshake or the tool listing failed (`target`: the command
 *   without its arguments, which often carry credentials, or the URL without
 *   its user info, query or fragment). The toolkit is not built;
 * - `"InvalidTool"`: the server listed a tool the toolkit cannot offer: two
 *   tools of one name, or of names that read the same (they differ only in
 *   case, Unicode form, width, invisible characters or spaces at either end:
 *   the detail names both), or a name that is not a non-empty string
 *   (`tool`). Nothing is offered to the model: the toolkit is not built;
 * - `"Disconnected"`: a tool call lost its session before the answer came:
 *   the server process exited, the HTTP connection broke or was refused
 *   (`tool`). It is the tool's typed failure, so in an agent the model reads
 *   it as a failed tool result (and `wrapToolCall` middleware can act on
 *   it); the session is not reopened.
 *
 * @since 0.1.0
 * @category errors
 */
export const McpErrorReason = Schema.Literal("ConnectFailed", "InvalidTool", "Disconnected")

/**
 * @since 0.1.0
 * @category errors
 */
export type McpErrorReason = typeof McpErrorReason.Type

/**
 * A failure of a session with an MCP server: `reason` says which
 * ({@link McpErrorReason}), `server` names the server, `detail` says what
 * happened (it holds no credential).
 *
 * @example
 * ```ts
 * import { McpToolkit } from "@stepwise-agent/mcp"
 *
 * const lost = new McpToolkit.McpError({
 *   reason: "Disconnected",
 *   server: "files",
 *   tool: "read",
 *   detail: "the server process exited"
 * })
 * lost.message // 'MCP server "files" could not answer the call of "read": the server process exited'
 * ```
 *
 * @since 0.1.0
 * @category errors
 */
export class McpError extends Schema.TaggedError<McpError>("@stepwise-agent/mcp/McpToolkit/McpError")("McpError", {
  reason: McpErrorReason,
  server: Schema.String,
  /** `"ConnectFailed"`: the command or URL connected to, without credentials. */
  target: Schema.optional(Schema.String),
  /** `"InvalidTool"`, `"Disconnected"`: the tool listed or called. */
  tool: Schema.optional(Schema.String),
  detail: Schema.String
}) {
  /**
   * @since 0.1.0
   */
  override get message(): string {
    switch (this.reason) {
      case "ConnectFailed":
        return `Could not connect to MCP server "${this.server}" (${this.target ?? ""}): ${this.detail}`
      case "InvalidTool":
        return `MCP server "${this.server}" lists the tool ${
          JSON.stringify(this.tool ?? "")
        }, which cannot be used: ${this.detail}`
      case "Disconnected":
        return `MCP server "${this.server}" could not answer the call of "${this.tool ?? ""}": ${this.detail}`
    }
  }
}

/**
 * A tool of an MCP server: {@link Arguments} in, any JSON result out,
 * {@link McpError} (reason `"Disconnected"`) as its failure.
 *
 * @since 0.1.0
 * @category models
 */
export type McpTool = Tool.Tool<string, {
  readonly parameters: typeof Arguments
  readonly success: typeof Schema.Unknown
  readonly failure: typeof McpError
  readonly failureMode: "error"
}>

/**
 * The tools of a server, by name.
 *
 * @since 0.1.0
 * @category models
 */
export type Tools = Record<string, McpTool>

// =============================================================================
// Tag
// =============================================================================

/**
 * The toolkit of the server that {@link layer} connected to; give it to
 * `Agent.make({ toolkit: McpToolkit.McpToolkit })`.
 *
 * @since 0.1.0
 * @category tags
 */
export class McpToolkit extends Context.Tag("@stepwise-agent/mcp/McpToolkit")<
  McpToolkit,
  Toolkit.WithHandler<Tools>
>() {}

// =============================================================================
// Constructors
// =============================================================================

/** The SDK's request timeout, used when `timeout` is not given. */
const defaultTimeout = Duration.seconds(60)

const optionKeys = keysOf<Options>({ name: true, transport: true, timeout: true, concurrency: true })

/** The keys of each transport. */
const transportKeys: { readonly [Tag in Transport["_tag"]]: ReadonlyArray<string> } = {
  Stdio: keysOf<StdioTransport>({ _tag: true, command: true, args: true, env: true, cwd: true }),
  Http: keysOf<HttpTransport>({ _tag: true, url: true, headers: true }),
  InProcess: keysOf<InProcessTransport>({ _tag: true, server: true })
}

const invalid = (option: string, reason: string) =>
  new AgentError.InvalidOptions({ module: "McpToolkit", option, reason })

/** The first entry of `record` (`env`, `headers`) that is not a string or a `Redacted`, as an `InvalidOptions`. */
const secretsProblem = (option: string, record: unknown): AgentError.InvalidOptions | undefined => {
  if (record === undefined) return undefined
  if (typeof record !== "object" || record === null || Array.isArray(record)) {
    return invalid(option, `must be an object of strings or Redacted strings, got ${Secrets.describeValue(record)}`)
  }
  for (const [key, value] of Object.entries(record)) {
    if (typeof value !== "string" && !Redacted.isRedacted(value)) {
      // a credential's value is not shown, whatever it is: only its type
      return invalid(
        `${option}[${JSON.stringify(key.slice(0, 80))}]`,
        `must be a string or a Redacted string, got a value of type ${value === null ? "null" : typeof value}`
      )
    }
  }
  return undefined
}

const validate = (options: Options): AgentError.InvalidOptions | Duration.Duration | undefined => {
  if (!Predicate.isObject(options)) {
    return invalid("options", `must be an object, got ${Secrets.describeValue(options)}`)
  }
  const unknown = unknownKey("McpToolkit", options, optionKeys)
  if (unknown !== undefined) return unknown
  if (typeof options.name !== "string" || options.name.trim() === "") {
    return invalid("name", "must be a non-empty string")
  }
  const transport: unknown = options.transport
  const tag = Predicate.hasProperty(transport, "_tag") ? transport._tag : undefined
  const unknownInTransport = typeof tag === "string" && Object.hasOwn(transportKeys, tag)
    ? unknownKey("McpToolkit", transport, transportKeys[tag as Transport["_tag"]], "transport")
    : undefined
  if (unknownInTransport !== undefined) return unknownInTransport
  switch (tag) {
    case "Stdio": {
      const { args, command, cwd, env } = transport as StdioTransport
      if (typeof command !== "string" || command === "") {
        return invalid("transport.command", "must be a non-empty string")
      }
      if (args !== undefined && !(Array.isArray(args) && args.every((arg) => typeof arg === "string"))) {
        return invalid("transport.args", `must be an array of strings, got ${Secrets.describeValue(args)}`)
      }
      if (cwd !== undefined && typeof cwd !== "string") {
        return invalid("transport.cwd", `must be a string, got ${Secrets.describeValue(cwd)}`)
      }
      const badEnv = secretsProblem("transport.env", env)
      if (badEnv !== undefined) return badEnv
      break
    }
    case "Http": {
      const { headers, url: given } = transport as HttpTransport
      const text = typeof given === "string" ? given : given instanceof URL ? given.href : undefined
      const url = text !== undefined && URL.canParse(text) ? new URL(text) : undefined
      if (url === undefined || (url.protocol !== "http:" && url.protocol !== "https:")) {
        return invalid(
          "transport.url",
          `must be an http or https URL, got ${
            text === undefined ? Secrets.describeValue(given) : Session.describeUrl(text)
          }`
        )
      }
      if (url.username !== "" || url.password !== "") {
        return invalid("transport.url", "must not hold user info; send credentials in headers")
      }
      const badHeaders = secretsProblem("transport.headers", headers)
      if (badHeaders !== undefined) return badHeaders
      break
    }
    case "InProcess": {
      const { server } = transport as InProcessTransport
      if (!Predicate.hasProperty(server, "connect") || typeof server.connect !== "function") {
        return invalid("transport.server", "must be a server with a connect method, such as an McpServer")
      }
      break
    }
    default: {
      return invalid(
        "transport",
        `_tag must be "Stdio", "Http" or "InProcess", got ${
          typeof tag === "string" ? JSON.stringify(tag.slice(0, 80)) : Secrets.describeValue(tag)
        }`
      )
    }
  }
  const concurrency: unknown = options.concurrency
  if (
    concurrency !== undefined && concurrency !== "unbounded" &&
    !(typeof concurrency === "number" && Number.isInteger(concurrency) && concurrency >= 1)
  ) {
    return invalid(
      "concurrency",
      `must be a whole number of at least 1 or "unbounded", got ${
        typeof concurrency === "string" ? JSON.stringify(concurrency.slice(0, 80)) : Secrets.describeValue(concurrency)
      }`
    )
  }
  if (options.timeout === undefined) return undefined
  const timeout = Duration.decodeUnknown(options.timeout)
  if (
    Option.isNone(timeout) || !Duration.greaterThan(timeout.value, Duration.zero) || !Duration.isFinite(timeout.value)
  ) {
    return invalid(
      "timeout",
      `must be a finite duration above zero, got ${
        typeof options.timeout === "string" ? options.timeout.slice(0, 80) : Secrets.describeValue(options.timeout)
      }`
    )
  }
  return timeout.value
}

const jsonSchemaOf = (definition: McpToolDefinition): object => {
  const { $schema: _, ...schema } = definition.inputSchema as Record<string, unknown>
  return schema
}

/**
 * The tool with an id of its own. `Tool.make` ids a tool by its name alone
 * (`@effect/ai/Tool/<name>`), and handlers are found in a context by that
 * id: a local tool's handler of the same name would otherwise answer the
 * calls of the server's tool.
 */
const withOwnId = <T extends Tool.Any>(tool: T, id: string): T =>
  Object.assign(Object.create(Object.getPrototypeOf(tool)), tool, { id })

/**
 * Whether a tool is read-only: the server says so (`readOnlyHint: true`) and
 * does not say too that it destroys (`destructiveHint: true`). Hints that
 * contradict each other count as no promise.
 */
const isReadOnly = (definition: McpToolDefinition): boolean =>
  definition.annotations?.readOnlyHint === true && definition.annotations.destructiveHint !== true

const toolOf = (server: string, definition: McpToolDefinition): McpTool => {
  const hints = definition.annotations
  let tool = Tool.make(definition.name, {
    ...(definition.description === undefined ? {} : { description: definition.description }),
    success: Schema.Unknown,
    failure: McpError
  }).setParameters(Arguments.annotations({ jsonSchema: jsonSchemaOf(definition) }))
  const title = definition.title ?? hints?.title
  if (title !== undefined) tool = tool.annotate(Tool.Title, title)
  if (hints?.readOnlyHint !== undefined) tool = tool.annotate(Tool.Readonly, isReadOnly(definition))
  if (hints?.destructiveHint !== undefined) tool = tool.annotate(Tool.Destructive, hints.destructiveHint)
  if (hints?.idempotentHint !== undefined) tool = tool.annotate(Tool.Idempotent, hints.idempotentHint)
  if (hints?.openWorldHint !== undefined) tool = tool.annotate(Tool.OpenWorld, hints.openWorldHint)
  return withOwnId(tool, `@stepwise-agent/mcp/McpToolkit/${server}/${definition.name}`) as McpTool
}

/**
 * A block as the agent sends it: an image, an audio clip or an embedded
 * binary resource as a file item (`{ type: "file", mediaType, data }`), which
 * the agent gives the model as a file part instead of base64 text; other
 * blocks as they are.
 */
const blockOf = (block: NonNullable<CallToolResult["content"]>[number]): unknown => {
  switch (block.type) {
    case "image":
    case "audio":
      return { type: "file", mediaType: block.mimeType, data: block.data }
    case "resource":
      return "blob" in block.resource && typeof block.resource.blob === "string"
        ? {
          type: "file",
          mediaType: block.resource.mimeType ?? "application/octet-stream",
          data: block.resource.blob,
          fileName: block.resource.uri
        }
        : block
    default:
      return block
  }
}

/**
 * What the model reads of a result: the structured content when the tool
 * returned one, else the text when every block is text, else the blocks
 * (files as file items, see {@link blockOf}).
 */
const contentOf = (result: CallToolResult): unknown => {
  if (result.structuredContent !== undefined && result.isError !== true) return result.structuredContent
  const blocks = result.content ?? []
  return blocks.every((block) => block.type === "text")
    ? blocks.map((block) => block.text).join("\n")
    : blocks.map(blockOf)
}

const handlerResult = (isFailure: boolean, result: unknown): Tool.HandlerResult<McpTool> => ({
  isFailure,
  result,
  encodedResult: result
})

/**
 * Connects to an MCP server and returns its tools as a handled toolkit,
 * ready for `Agent.make({ toolkit })` or `LanguageModel.generateText`. The
 * session lives as long as the scope.
 *
 * What the model reads: a result's structured content when the tool returned
 * one, else its text (text blocks joined by newlines), else its content
 * blocks; a result with `isError: true`, and a JSON-RPC error the server
 * answered (unknown tool, invalid arguments), as a failed result
 * `{ error: … }` it can repair; a call that lost the server as the typed
 * failure {@link McpError} of reason `"Disconnected"`. The tool list is read once, at connection.
 *
 * Calls of the tools the server marks read-only (`readOnlyHint: true`, and
 * not `destructiveHint: true` too: hints that contradict count as none) run
 * as the agent runs them, in parallel; the others wait for each other, up to
 * `concurrency` at once (default 1), a cancelled call holding its place until
 * the server answers it (or the session ends, or `timeout` passes again). A server listing more than 10,000
 * tools, or whose list does not end, fails with `McpError` (`"ConnectFailed"`).
 *
 * Fails with `McpError` of reason `"ConnectFailed"` when the server cannot be reached or the
 * handshake fails, of reason `"InvalidTool"` when it lists two tools of one name
 * or of names that read the same (core's `ToolName.keys`: `"delete"` and `"Delete"`, `"ｄｅｌｅｔｅ"`,
 * `"del\u200bete"`, `"delete "` or `"d\u0435lete"` with a Cyrillic `е`), or a tool without a name, and with `InvalidOptions` (module
 * `"McpToolkit"`) for bad options, a key it does not know in the options or their transport included (before it
 * connects). `Agent.make` makes the same check across
 * servers and the agent's other tools (`AgentError.ToolNameClash`).
 *
 * @example
 * ```ts
 * import { Agent } from "@stepwise-agent/core"
 * import { McpToolkit } from "@stepwise-agent/mcp"
 * import { Effect } from "effect"
 *
 * const program = Effect.gen(function*() {
 *   const agent = yield* Agent.make({
 *     toolkit: McpToolkit.make({
 *       name: "files",
 *       transport: { _tag: "Stdio", command: "npx", args: ["-y", "@modelcontextprotocol/server-filesystem", "."] }
 *     })
 *   })
 *   return yield* agent.run("List the files here", { threadId: "t1" })
 * }).pipe(Effect.scoped) // the server process exits here
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (
  options: Options
): Effect.Effect<
  Toolkit.WithHandler<Tools>,
  McpError | AgentError.InvalidOptions,
  Scope.Scope
> =>
  Effect.gen(function*() {
    const timeout = validate(options)
    if (timeout instanceof AgentError.InvalidOptions) return yield* timeout
    const server = options.name
    const session = yield* Session.connect(options.transport, {
      timeoutMillis: timeout === undefined ? undefined : Duration.toMillis(timeout)
    }).pipe(
      Effect.mapError(({ reason, target }) => new McpError({ reason: "ConnectFailed", server, target, detail: reason }))
    )
    // a tool name is data: `__proto__` or `constructor` is a name like any other
    const tools: Tools = Object.create(null)
    // the names listed so far under their keys (`ToolName.keys`): two names that read alike are refused
    const folded = new Map<string, string>()
    for (const definition of session.tools) {
      const name: unknown = definition.name
      const problem = typeof name === "string" ? ToolName.problemOf(name) : "it is not a string"
      if (typeof name !== "string" || problem !== undefined) {
        return yield* new McpError({
          reason: "InvalidTool",
          server,
          tool: String(name).slice(0, ToolName.maxLength),
          detail: `its name cannot be a tool's name: ${problem}`
        })
      }
      const keys = ToolName.keys(name)
      const twin = keys.map((key) => folded.get(key)).find((found) => found !== undefined)
      if (twin !== undefined) {
        return yield* new McpError({
          reason: "InvalidTool",
          server,
          tool: name,
          detail: twin === name
            ? "the server lists two tools of this name"
            : `the server also lists ${ToolName.quote(twin)}, a name that reads the same: ${
              ToolName.quote(name)
            } differs from it only in case, Unicode form, width, look-alike letters, invisible characters or spaces at either end`
        })
      }
      for (const key of keys) folded.set(key, name)
      Object.defineProperty(tools, name, {
        value: toolOf(server, definition),
        enumerable: true,
        writable: true,
        configurable: true
      })
    }
    const readOnly = new Set(session.tools.filter(isReadOnly).map(({ name }) => name))
    // the calls that may change the server's state take a permit: one at a time by default
    const concurrency = options.concurrency ?? 1
    const permits = concurrency === "unbounded" ? undefined : yield* Effect.makeSemaphore(concurrency)
    const scope = yield* Effect.scope
    const grace = timeout ?? defaultTimeout
    // A call cancelled (interrupted, or past its timeout) may still run on the server, which need not stop:
    // its permit is kept until the server answers, the session ends, or `grace` has passed.
    const releaseWhen = (semaphore: Effect.Semaphore, done: Deferred.Deferred<void>) =>
      Effect.flatMap(Deferred.isDone(done), (isDone) =>
        isDone ? semaphore.release(1) : Deferred.await(done).pipe(
          Effect.timeoutOption(grace),
          Effect.ensuring(semaphore.release(1)),
          // forked from a finalizer: interruptible, so that closing the toolkit's scope ends the wait
          Effect.interruptible,
          Effect.forkIn(scope),
          Effect.asVoid
        ))
    const callOf = (name: string, params: unknown): Effect.Effect<Session.Answer, string> =>
      permits === undefined || readOnly.has(name)
        ? session.call(name, params)
        : Effect.uninterruptibleMask((restore) =>
          Effect.zipRight(
            restore(permits.take(1)),
            Effect.flatMap(
              session.start(name, params),
              ({ answer, done }) => restore(answer).pipe(Effect.ensuring(releaseWhen(permits, done)))
            )
          )
        )
    const handle = (name: string, params: unknown): Effect.Effect<Tool.HandlerResult<McpTool>, McpError> =>
      Object.hasOwn(tools, name)
        ? callOf(name, params).pipe(
          Effect.map((answer) =>
            answer._tag === "Failed"
              ? handlerResult(true, { error: answer.reason })
              : answer.result.isError === true
              ? handlerResult(true, { error: contentOf(answer.result) })
              : handlerResult(false, contentOf(answer.result))
          ),
          Effect.mapError((detail) => new McpError({ reason: "Disconnected", server, tool: name, detail })),
          Effect.withSpan("McpToolkit.callTool", {
            attributes: { "mcp.server": server, "mcp.tool": name },
            captureStackTrace: false
          })
        )
        : Effect.dieMessage(`MCP server "${server}" has no tool "${name}"`)
    return { tools, handle: handle as Toolkit.WithHandler<Tools>["handle"] }
  }).pipe(
    Effect.withSpan("McpToolkit.make", {
      // (options that are not an object, from JavaScript, fail in the check above)
      attributes: { "mcp.server": Predicate.hasProperty(options, "name") ? options.name : undefined },
      captureStackTrace: false
    })
  )

// =============================================================================
// Layers
// =============================================================================

/**
 * The {@link McpToolkit} service: the session opens when the Layer is built
 * and closes when it is released (the child process exits; an HTTP session
 * is ended with a DELETE). Building fails with `McpError` (`"ConnectFailed"`) naming the
 * server and its command or URL.
 *
 * @example
 * ```ts
 * import { Agent } from "@stepwise-agent/core"
 * import { McpToolkit } from "@stepwise-agent/mcp"
 * import { Layer, Redacted } from "effect"
 *
 * const AgentLive = Agent.layer({ toolkit: McpToolkit.McpToolkit }).pipe(
 *   Layer.provide(McpToolkit.layer({
 *     name: "tickets",
 *     transport: {
 *       _tag: "Http",
 *       url: "https://mcp.example.com/mcp",
 *       headers: { Authorization: Redacted.make("Bearer secret") }
 *     }
 *   }))
 * )
 * ```
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (
  options: Options
): Layer.Layer<McpToolkit, McpError | AgentError.InvalidOptions> => Layer.scoped(McpToolkit, make(options))
