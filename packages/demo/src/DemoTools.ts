/**
 * The demo agent's tools: a calculator, and a file lister and reader
 * confined to the bundled `data/` folder.
 *
 * @since 0.1.0
 */
import * as Tool from "@effect/ai/Tool"
import * as Toolkit from "@effect/ai/Toolkit"
import * as FileSystem from "@effect/platform/FileSystem"
import * as Path from "@effect/platform/Path"
import * as Effect from "effect/Effect"
import type * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import { evaluate } from "./Calculator.js"

/**
 * Evaluates arithmetic.
 *
 * @since 0.1.0
 * @category tools
 */
export const Calculate = Tool.make("calculate", {
  description: "Evaluate an arithmetic expression with numbers, + - * / and parentheses.",
  parameters: { expression: Schema.String.annotations({ description: "e.g. (2 + 3) * 4" }) },
  success: Schema.Number,
  failure: Schema.Struct({ error: Schema.String }),
  failureMode: "return"
}).annotate(Tool.Readonly, true)

/**
 * Lists the files the agent may read.
 *
 * @since 0.1.0
 * @category tools
 */
export const ListFiles = Tool.make("list_files", {
  description: "List the files in the sandbox folder.",
  success: Schema.Array(Schema.String)
}).annotate(Tool.Readonly, true)

/**
 * Reads one file of the sandbox folder.
 *
 * @since 0.1.0
 * @category tools
 */
export const ReadFile = Tool.make("read_file", {
  description: "Read a text file from the sandbox folder.",
  parameters: { path: Schema.String.annotations({ description: "a file name from list_files" }) },
  success: Schema.String,
  failure: Schema.Struct({ error: Schema.String }),
  failureMode: "return"
}).annotate(Tool.Readonly, true)

/**
 * @since 0.1.0
 * @category tools
 */
export const DemoToolkit = Toolkit.make(Calculate, ListFiles, ReadFile)

/** The largest file `read_file` reads (bytes). */
const maxFileBytes = 1024 * 1024

/**
 * The handlers, reading files below `directory`. `read_file` reads regular
 * files of at most 1 MiB: a FIFO, a device or a larger file is refused with
 * the tool's error.
 *
 * @example
 * ```ts
 * import { layerHandlers } from "./DemoTools.js"
 *
 * const HandlersLive = layerHandlers("/tmp/sandbox")
 * ```
 *
 * @since 0.1.0
 * @category layers
 */
export const layerHandlers = (
  directory: string
): Layer.Layer<Tool.Handler<"calculate" | "list_files" | "read_file">, never, FileSystem.FileSystem | Path.Path> =>
  DemoToolkit.toLayer(Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const path = yield* Path.Path
    const root = path.resolve(directory)
    return DemoToolkit.of({
      calculate: ({ expression }) => {
        const result = evaluate(expression)
        return result._tag === "Right" ? Effect.succeed(result.right) : Effect.fail({ error: result.left })
      },
      list_files: () => fs.readDirectory(root).pipe(Effect.map((names) => names.sort()), Effect.orDie),
      read_file: ({ path: file }) => {
        const target = path.resolve(root, file)
        if (!target.startsWith(root + path.sep)) {
          return Effect.fail({ error: `"${file}" is outside the sandbox folder` })
        }
        const unreadable = { error: `cannot read "${file}"; use list_files to see what exists` }
        // only a regular file of bounded size is opened: a FIFO waits for a writer, /dev/zero never ends
        return fs.stat(target).pipe(
          Effect.mapError(() => unreadable),
          Effect.flatMap((info) =>
            info.type !== "File"
              ? Effect.fail({ error: `"${file}" is a ${info.type}, not a regular file` })
              : info.size > maxFileBytes
              ? Effect.fail({ error: `"${file}" has ${info.size} bytes, over the ${maxFileBytes} read_file reads` })
              : Effect.mapError(fs.readFileString(target), () => unreadable)
          )
        )
      }
    })
  }))
