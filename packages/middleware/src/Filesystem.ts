/**
 * File tools for an agent, as deepagents' `FilesystemMiddleware` gives them:
 * `ls`, `read_file` (numbered lines, paged with `offset` / `limit`),
 * `write_file`, `edit_file` (exact string replacement), `glob` and `grep`.
 *
 * Two storages:
 *
 * - `"state"` (the default): virtual files in the agent's `files` state
 *   slice, checkpointed with the thread, so they survive `resume` and durable
 *   runs. The slice is the truth: a tool step works on a copy of it, and the
 *   result of each successful `write_file` / `edit_file` carries the files it
 *   changed (under the `stepwise` key of the result part's provider options,
 *   which no provider sends to a model). The `beforeModel`, `beforeAgent` and
 *   `afterAgent` hooks move those changes into the slice, so the slice is a
 *   deterministic function of the stored messages, whatever process runs
 *   the next step (as `TodoList` does with its list).
 * - `"workspace"`: the `Workspace` service the app provides — a real
 *   directory jailed to a root (`Workspace.layerDirectory`) or memory.
 *
 * With `routes`, paths under a prefix go to another workspace, whichever the
 * storage (`Workspace.composite`): `{ "/memories": directory }` keeps
 * `/memories/...` in a real directory across threads while the rest stays
 * in the thread's state; `ls`, `glob` and `grep` merge them.
 *
 * A path outside the root, a write to a read-only path, a missing file or an
 * ambiguous edit comes back to the model as a failed tool result
 * (`{ error: "..." }`) it can read and repair; the run goes on.
 *
 * @since 0.1.0
 */
import type * as Prompt from "@effect/ai/Prompt"
import * as Tool from "@effect/ai/Tool"
import * as Toolkit from "@effect/ai/Toolkit"
import * as AgentError from "@stepwise-agent/core/AgentError"
import * as Middleware from "@stepwise-agent/core/Middleware"
import * as ToolContext from "@stepwise-agent/core/ToolContext"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import * as Predicate from "effect/Predicate"
import * as Schema from "effect/Schema"
import * as Marker from "./internal/marker.js"
import * as Check from "./internal/options.js"
import * as Reserved from "./internal/reservedPaths.js"
import { appendWhenOffered } from "./internal/toolPrompt.js"
import * as WholeCharacters from "./internal/wholeCharacters.js"
import * as Workspace from "./Workspace.js"

// -----------------------------------------------------------------------------
// models
// -----------------------------------------------------------------------------

/**
 * The names of the tools.
 *
 * @since 0.1.0
 * @category models
 */
export const toolNames = ["ls", "read_file", "write_file", "edit_file", "glob", "grep"] as const

/**
 * How many lines `read_file` gives when the model sets no `limit`.
 *
 * @since 0.1.0
 * @category models
 */
export const defaultReadLimit = 2000

/**
 * Lines longer than this are cut in `read_file`'s output.
 *
 * @since 0.1.0
 * @category models
 */
export const maxLineLength = 2000

/**
 * The failure value of every file tool: the workspace error's message.
 *
 * @since 0.1.0
 * @category models
 */
export const ToolFailure = Schema.Struct({ error: Schema.String })

const Ls = Tool.make("ls", {
  description: "List the files and directories directly under a directory of the workspace (directories end " +
    "with \"/\"). Paths are absolute, rooted at \"/\".",
  parameters: {
    path: Schema.optional(Schema.String).annotations({ description: "The directory to list (default \"/\")" })
  },
  success: Schema.String,
  failure: ToolFailure,
  failureMode: "return"
}).annotate(Tool.Readonly, true)

const ReadFile = Tool.make("read_file", {
  description: "Read a file of the workspace. The output numbers each line like `cat -n`. By default it gives " +
    `the first ${defaultReadLimit} lines; for a long file, read it in pages with offset (the first line to give, ` +
    "from 0) and limit (how many lines).",
  parameters: {
    file_path: Schema.String.annotations({ description: "Absolute path of the file, e.g. /notes/plan.md" }),
    offset: Schema.optional(Schema.Int.pipe(Schema.nonNegative())).annotations({
      description: "The line to start at, from 0 (default 0)"
    }),
    limit: Schema.optional(Schema.Int.pipe(Schema.positive())).annotations({
      description: `How many lines to read (default ${defaultReadLimit})`
    })
  },
  success: Schema.String,
  failure: ToolFailure,
  failureMode: "return"
}).annotate(Tool.Readonly, true)

const WriteFile = Tool.make("write_file", {
  description: "Create a file in the workspace, or replace its whole content. Prefer edit_file to change part " +
    "of an existing file.",
  parameters: {
    file_path: Schema.String.annotations({ description: "Absolute path of the file, e.g. /notes/plan.md" }),
    content: Schema.String
  },
  success: Schema.String,
  failure: ToolFailure,
  failureMode: "return"
})

const EditFile = Tool.make("edit_file", {
  description: "Replace exact text in a file of the workspace. old_string must occur exactly once in the file, " +
    "unless replace_all is true; copy it from read_file's output without the line numbers.",
  parameters: {
    file_path: Schema.String,
    old_string: Schema.String.annotations({ description: "The exact text to replace" }),
    new_string: Schema.String.annotations({ description: "The text to put in its place" }),
    replace_all: Schema.optional(Schema.Boolean).annotations({
      description: "Replace every occurrence (default false)"
    })
  },
  success: Schema.String,
  failure: ToolFailure,
  failureMode: "return"
})

const Glob = Tool.make("glob", {
  description: "Find files of the workspace whose path matches a glob pattern (`*` within a name, `**` across " +
    "directories, `{a,b}` either), e.g. `**/*.md`.",
  parameters: {
    pattern: Schema.String,
    path: Schema.optional(Schema.String).annotations({
      description: "The directory to search, which the pattern is relative to (default \"/\")"
    })
  },
  success: Schema.String,
  failure: ToolFailure,
  failureMode: "return"
}).annotate(Tool.Readonly, true)

/**
 * What `grep` gives: the paths of the files that match (default), the
 * matching lines, or a count per file.
 *
 * @since 0.1.0
 * @category models
 */
export const GrepOutputMode = Schema.Literal("files_with_matches", "content", "count")

const Grep = Tool.make("grep", {
  description: "Search the files of the workspace for a literal text (not a regular expression).",
  parameters: {
    pattern: Schema.String.annotations({ description: "The text to search for" }),
    path: Schema.optional(Schema.String).annotations({ description: "The directory to search (default \"/\")" }),
    glob: Schema.optional(Schema.String).annotations({ description: "Only files matching this glob, e.g. *.md" }),
    output_mode: Schema.optional(GrepOutputMode).annotations({
      description: "files_with_matches (default): the paths; content: the matching lines with their numbers; " +
        "count: matches per file"
    })
  },
  success: Schema.String,
  failure: ToolFailure,
  failureMode: "return"
}).annotate(Tool.Readonly, true)

/**
 * The six file tools. The middleware brings its own handled copy; this one is
 * for code that needs the definitions, such as
 * `HumanInTheLoop.middleware({ toolkit: Toolkit.merge(MyTools, Filesystem.toolkit) })`.
 *
 * @since 0.1.0
 * @category models
 */
export const toolkit = Toolkit.make(Ls, ReadFile, WriteFile, EditFile, Glob, Grep)

/**
 * @since 0.1.0
 * @category models
 */
export const defaultSystemPrompt = "## Files\n\n" +
  "You have a workspace of files and the tools `ls`, `read_file`, `write_file`, `edit_file`, `glob` and `grep` " +
  "to work with it. Paths are absolute, rooted at \"/\". Use files to keep notes and large intermediate results " +
  "out of the conversation; read long files in pages with offset and limit."

/**
 * The state slice of the `"state"` storage: file contents by absolute path.
 *
 * @since 0.1.0
 * @category models
 */
export interface State {
  readonly files: Readonly<Record<string, string>>
}

/**
 * @since 0.1.0
 * @category models
 */
export const Files = Schema.Record({ key: Schema.String, value: Schema.String })

/**
 * Options of {@link middleware}.
 *
 * @since 0.1.0
 * @category models
 */
export interface Options {
  /** Appended to the agent's system prompt on every model call that offers the tools. */
  readonly systemPrompt?: string | undefined
  /**
   * Workspaces mounted at path prefixes (`Workspace.composite`): a path under
   * a prefix goes to its workspace (the longest prefix wins), the others to
   * the storage. Default none.
   */
  readonly routes?: Readonly<Record<string, Workspace.Service>> | undefined
}

/**
 * Options of the `"state"` storage (the default).
 *
 * @since 0.1.0
 * @category models
 */
export interface StateOptions extends Options, Workspace.AccessOptions {
  /**
   * Access rules over every path the tools use, routed ones included: a
   * read-only `/memories` rule keeps a workspace mounted at `/memories`
   * read-only (its own rules apply as well).
   */
  readonly rules?: ReadonlyArray<Workspace.Rule> | undefined
  readonly storage?: "state" | undefined
}

/**
 * Options of the `"workspace"` storage: the files of the `Workspace` service
 * (its own access rules apply). `rules` and `defaultAccess` given here apply
 * on top of them, to every path, routed ones included.
 *
 * @since 0.1.0
 * @category models
 */
export interface WorkspaceOptions extends Options, Workspace.AccessOptions {
  readonly storage: "workspace"
}

// -----------------------------------------------------------------------------
// what the tools give the model
// -----------------------------------------------------------------------------

/**
 * `read_file`'s output: the lines `offset` to `offset + limit` numbered like
 * `cat -n` (from 1, right-aligned on 6 columns, a tab, the line), with a
 * last line saying how to read on when the file goes on.
 *
 * @example
 * ```ts
 * import { Filesystem } from "@stepwise-agent/middleware"
 *
 * Filesystem.numberedLines("a\nb\nc", 1, 1) // "     2\tb\n... 1 more line; read on with offset=2"
 * ```
 *
 * @since 0.1.0
 * @category combinators
 */
export const numberedLines = (content: string, offset: number, limit: number): string => {
  if (content === "") return "(the file is empty)"
  const lines = content.split(/\r?\n/)
  if (offset >= lines.length) return `(offset ${offset} is past the end: the file has ${lines.length} lines)`
  const end = Math.min(lines.length, offset + limit)
  const out: Array<string> = []
  for (let i = offset; i < end; i++) {
    const line = lines[i]!
    const shown = line.length > maxLineLength ? `${WholeCharacters.head(line, maxLineLength)}... (line cut)` : line
    out.push(`${String(i + 1).padStart(6)}\t${shown}`)
  }
  const left = lines.length - end
  if (left > 0) out.push(`... ${left} more line${left === 1 ? "" : "s"}; read on with offset=${end}`)
  return out.join("\n")
}

const failure = (error: Workspace.WorkspaceError) => ({ error: error.message })

type Parameters<T extends Tool.Any> = Tool.Parameters<T>

/** The handlers of the six tools over a way to get the workspace of the running call. */
const handlersOver = <E extends { readonly error: string }>(
  workspace: Effect.Effect<Workspace.Service, E>
) => {
  const using = <A>(f: (service: Workspace.Service) => Effect.Effect<A, Workspace.WorkspaceError>) =>
    Effect.flatMap(workspace, (service) => Effect.mapError(f(service), failure))
  return {
    ls: ({ path }: Parameters<typeof Ls>) =>
      using((service) =>
        Effect.map(service.ls(path ?? "/"), (entries) =>
          entries.length === 0
            ? "(empty directory)"
            : entries.map((entry) => entry.isDirectory ? `${entry.path}/` : entry.path).join("\n"))
      ),
    read_file: ({ file_path, limit, offset }: Parameters<typeof ReadFile>) =>
      using((service) =>
        Effect.map(service.read(file_path), (content) => numberedLines(content, offset ?? 0, limit ?? defaultReadLimit))
      ),
    write_file: ({ content, file_path }: Parameters<typeof WriteFile>) =>
      using((service) =>
        Effect.as(service.write(file_path, content), `Wrote ${content.length} characters to ${file_path}`)
      ),
    edit_file: ({ file_path, new_string, old_string, replace_all }: Parameters<typeof EditFile>) =>
      using((service) =>
        Effect.map(
          service.edit(file_path, old_string, new_string, replace_all ?? false),
          (n) => `Replaced ${n} occurrence${n === 1 ? "" : "s"} in ${file_path}`
        )
      ),
    glob: ({ path, pattern }: Parameters<typeof Glob>) =>
      using((service) =>
        Effect.map(
          service.glob(pattern, path),
          (files) => files.length === 0 ? "No files match" : files.join("\n")
        )
      ),
    grep: ({ glob, output_mode, path, pattern }: Parameters<typeof Grep>) =>
      using((service) =>
        Effect.map(service.grep(pattern, { path, glob }), (matches) => {
          if (matches.length === 0) return "No matches"
          if (output_mode === "content") return matches.map((m) => `${m.path}:${m.line}: ${m.text}`).join("\n")
          const counts = new Map<string, number>()
          for (const match of matches) counts.set(match.path, (counts.get(match.path) ?? 0) + 1)
          return output_mode === "count"
            ? [...counts].map(([file, n]) => `${file}: ${n}`).join("\n")
            : [...counts.keys()].join("\n")
        })
      )
  }
}

// -----------------------------------------------------------------------------
// the changes a tool call made, carried by its result
// -----------------------------------------------------------------------------

/**
 * The files a tool call's result says it wrote (path to new content), when
 * it is a successful `write_file` / `edit_file` of the `"state"` storage.
 *
 * @example
 * ```ts
 * import { Filesystem } from "@stepwise-agent/middleware"
 * import { Prompt } from "@effect/ai"
 *
 * const part = Prompt.makePart("tool-result", {
 *   id: "call_1", name: "write_file", result: "Wrote 2 characters to /a.txt", isFailure: false,
 *   providerExecuted: false, options: { stepwise: { files: { "/a.txt": "hi" } } }
 * })
 * Filesystem.changesOf(part) // { "/a.txt": "hi" }
 * ```
 *
 * @since 0.1.0
 * @category accessors
 */
export const changesOf = (part: Prompt.ToolResultPart): Readonly<Record<string, string>> | undefined => {
  if (part.isFailure) return undefined
  const files = part.options[Marker.markerKey]?.files
  return typeof files === "object" && files !== null ? files as Record<string, string> : undefined
}

const withChanges = (part: Prompt.ToolResultPart, changes: Map<string, string>): Prompt.ToolResultPart =>
  changes.size === 0 || part.isFailure ? part : {
    ...part,
    options: {
      ...part.options,
      [Marker.markerKey]: { ...part.options[Marker.markerKey], files: Object.fromEntries(changes) }
    }
  } as Prompt.ToolResultPart

/**
 * The changes of the last model turn's tool calls, in call order, applied to
 * `files`; `files` itself when they change nothing.
 */
const applyLastTurn = (
  messages: ReadonlyArray<Prompt.Message>,
  files: Readonly<Record<string, string>>
): Readonly<Record<string, string>> => {
  let index = messages.length - 1
  while (index >= 0 && messages[index]!.role !== "assistant") index--
  if (index < 0) return files
  const results = new Map<string, Prompt.ToolResultPart>()
  for (let i = index; i < messages.length; i++) {
    const message = messages[i]!
    if (message.role === "tool" || message.role === "assistant") {
      for (const part of message.content) if (part.type === "tool-result") results.set(part.id, part)
    }
  }
  let out = files
  for (const part of (messages[index] as Prompt.AssistantMessage).content) {
    if (part.type !== "tool-call") continue
    const result = results.get(part.id)
    const changes = result === undefined ? undefined : changesOf(result)
    if (changes === undefined) continue
    for (const [path, content] of Object.entries(changes)) {
      if (out[path] === content) continue
      if (out === files) out = { ...files }
      ;(out as Record<string, string>)[path] = content
    }
  }
  return out
}

// -----------------------------------------------------------------------------
// the middleware
// -----------------------------------------------------------------------------

const RuleSchema = Schema.Struct({
  pattern: Check.NonBlank,
  access: Schema.Literal("read-only", "read-write")
})

const WorkspaceService = Schema.declare(
  (u: unknown): u is Workspace.Service =>
    ["ls", "read", "write", "edit", "glob", "grep"].every((key) =>
      Predicate.hasProperty(u, key) && typeof u[key] === "function"
    ),
  { identifier: "a Workspace service (Workspace.makeDirectory, Workspace.makeMemory, …)" }
)

const Routes = Schema.Record({ key: Schema.String, value: WorkspaceService })

const OptionsSchema = Schema.Union(
  Schema.Struct({
    storage: Schema.optional(Schema.Literal("state")),
    systemPrompt: Schema.optional(Schema.String),
    routes: Schema.optional(Routes),
    rules: Schema.optional(Schema.Array(RuleSchema)),
    defaultAccess: Schema.optional(Schema.Literal("read-only", "read-write"))
  }),
  Schema.Struct({
    storage: Schema.Literal("workspace"),
    systemPrompt: Schema.optional(Schema.String),
    routes: Schema.optional(Routes),
    rules: Schema.optional(Schema.Array(RuleSchema)),
    defaultAccess: Schema.optional(Schema.Literal("read-only", "read-write"))
  })
)

/**
 * `workspace` with `routes` mounted on it (`Workspace.composite`), and the
 * access rules over every path, routed or not; the routes were checked when
 * the middleware was built.
 */
const withRoutes = (
  routes: Options["routes"],
  access: Workspace.AccessOptions
): (workspace: Workspace.Service) => Workspace.Service =>
  (routes === undefined || Object.keys(routes).length === 0) && access.rules === undefined &&
    access.defaultAccess === undefined
    ? (workspace) => workspace
    : (workspace) =>
      Either.getOrThrow(Workspace.composite(
        workspace,
        // a route may be the workspace an offload store keeps its texts in: they stay hidden there too
        Object.fromEntries(Object.entries(routes ?? {}).map(([prefix, route]) => [prefix, Reserved.hiding(route)])),
        access
      ))

/** The `InvalidOptions` of bad `routes` or `rules`, named as options of this module. */
const badRoutes = (
  routes: Options["routes"],
  rules: ReadonlyArray<Workspace.Rule> | undefined
): AgentError.InvalidOptions | undefined => {
  if (routes === undefined && rules === undefined) return undefined
  const checked = Workspace.composite(Workspace.fromStorage(Workspace.memoryStorage(new Map())), routes ?? {}, {
    rules
  })
  return Either.isLeft(checked)
    ? new AgentError.InvalidOptions({ module: "Filesystem", option: checked.left.option, reason: checked.left.reason })
    : undefined
}

/**
 * Adds the file tools `ls`, `read_file`, `write_file`, `edit_file`, `glob`
 * and `grep` and a system prompt about them. By default the files live in
 * the agent's `files` state slice (checkpointed with the thread), with the
 * access `rules` given here; with `storage: "workspace"` they are the files
 * of the `Workspace` service (e.g. `Workspace.layerDirectory`, a real
 * directory jailed to a root). A failed operation (a path outside the root,
 * a read-only path, a missing file, an `old_string` not found or not unique)
 * is answered with a failed tool result the model can read. Bad options make
 * `Agent.make` fail with `AgentError.InvalidOptions`.
 *
 * @example
 * ```ts
 * import { Agent } from "@stepwise-agent/core"
 * import { Filesystem, Workspace } from "@stepwise-agent/middleware"
 * import { Effect } from "effect"
 *
 * // virtual files in the agent state, /docs read-only
 * const inState = Agent.make({
 *   middleware: [Filesystem.middleware({ rules: [{ pattern: "/docs", access: "read-only" }] })]
 * })
 *
 * // a real directory
 * const onDisk = Agent.make({ middleware: [Filesystem.middleware({ storage: "workspace" })] }).pipe(
 *   Effect.provide(Workspace.layerDirectory({ root: "/srv/project" }))
 * )
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const middleware: {
  (options: WorkspaceOptions): Middleware.Middleware<{}, never, Workspace.Workspace>
  (options?: StateOptions | undefined): Middleware.Middleware<State>
} = (options?: StateOptions | WorkspaceOptions | undefined): any =>
  Check.middlewareOf(
    "Filesystem",
    OptionsSchema,
    options,
    (checked) => {
      const invalid = badRoutes(checked.routes, checked.rules)
      if (invalid !== undefined) return Check.failing(invalid)
      return checked.storage === "workspace" ? buildWorkspace(checked) : buildState(checked)
    }
  )

const buildWorkspace = (options: WorkspaceOptions): Middleware.Middleware<{}, never, Workspace.Workspace> => {
  const routed = withRoutes(options.routes, { rules: options.rules, defaultAccess: options.defaultAccess })
  return Middleware.make({
    name: "filesystem",
    tools: Effect.flatMap(
      toolkit.toContext(
        Effect.map(
          Workspace.Workspace,
          // without the directories a store of the agent reserves (`Offload.layerWorkspace`'s texts)
          (service) => handlersOver(Effect.succeed(routed(Reserved.hiding(service))))
        )
      ),
      (context) => Effect.provide(toolkit, context)
    ),
    wrapModelCall: appendWhenOffered("read_file", options.systemPrompt ?? defaultSystemPrompt)
  })
}

/** What a file tool call of the `"state"` storage works on: the tool step's copy, and what this call wrote. */
interface Session {
  readonly files: Map<string, string>
  readonly changes: Map<string, string>
}

const isFileTool = (name: string): boolean => (toolNames as ReadonlyArray<string>).includes(name)

const buildState = (options: StateOptions): Middleware.Middleware<State> => {
  const access: Workspace.AccessOptions = { rules: options.rules, defaultAccess: options.defaultAccess }
  const routed = withRoutes(options.routes, access)
  // The calls of one tool step share a copy of the slice (keyed by the step's state object, the only value
  // the calls of a step share; not a speed trick: a call sees what the step's earlier calls wrote).
  const copies = new WeakMap<object, Map<string, string>>()
  const sessions = new Map<string, Session>()
  const workspace = Effect.flatMap(
    Effect.orElseSucceed(Effect.map(ToolContext.current, (call) => sessions.get(call.idempotencyKey)), () => undefined),
    (session) =>
      session === undefined
        ? Effect.fail({ error: "The file tools run only inside an agent with the Filesystem middleware" })
        : Effect.succeed(routed(
          Workspace.fromStorage(
            Workspace.memoryStorage(session.files, (path, content) => session.changes.set(path, content)),
            access
          )
        ))
  )
  const sync = (context: Middleware.HookContext<State>) => {
    const files = applyLastTurn(context.messages, context.state.files)
    return Effect.succeed(files === context.state.files ? undefined : { state: { files } })
  }
  return Middleware.make({
    name: "filesystem",
    state: { schema: Schema.Struct({ files: Files }), initial: { files: {} } },
    tools: Effect.flatMap(toolkit.toContext(handlersOver(workspace)), (context) => Effect.provide(toolkit, context)),
    beforeAgent: sync,
    beforeModel: sync,
    afterAgent: sync,
    wrapModelCall: appendWhenOffered("read_file", options.systemPrompt ?? defaultSystemPrompt),
    wrapToolCall: (request, next) => {
      if (!isFileTool(request.call.name)) return next(request)
      let files = copies.get(request.state)
      if (files === undefined) {
        files = new Map(Object.entries((request.state as Partial<State>).files ?? {}))
        copies.set(request.state, files)
      }
      const session: Session = { files, changes: new Map() }
      const key = ToolContext.make(request.call.id, request.call.name, request.threadId).idempotencyKey
      return Effect.acquireUseRelease(
        Effect.sync(() => sessions.set(key, session)),
        () => Effect.map(next(request), (result) => withChanges(result, session.changes)),
        () => Effect.sync(() => sessions.delete(key))
      )
    }
  })
}

/**
 * The files of a thread's state (the `"state"` storage), for an app that
 * reads them after a run.
 *
 * @example
 * ```ts
 * import { Filesystem } from "@stepwise-agent/middleware"
 *
 * Filesystem.filesOf({ files: { "/a.txt": "hi" } }) // Option.some({ "/a.txt": "hi" })
 * ```
 *
 * @since 0.1.0
 * @category accessors
 */
export const filesOf = (state: Readonly<Record<string, unknown>>): Option.Option<Readonly<Record<string, string>>> =>
  Option.map(Schema.decodeUnknownOption(Schema.Struct({ files: Files }))(state), (decoded) => decoded.files)
