/**
 * The guards installed by the `wrapToolCall` hooks the current tool call
 * passed through (`Middleware.guardToolCall`); read by the tool step just
 * before the tool runs. A context reference: the chain of a call provides
 * it to the `next` it wraps, and the tool step reads it where the chain ends.
 */
import * as Context from "effect/Context"
import type { ToolCallGuard } from "../Middleware.js"

/** The guards of the current tool call, outermost first. */
export class ToolCallGuards extends Context.Reference<ToolCallGuards>()(
  "@stepwise-agent/core/Middleware/ToolCallGuards",
  { defaultValue: (): ReadonlyArray<ToolCallGuard> => [] }
) {}
