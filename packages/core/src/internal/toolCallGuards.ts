/**
 * The guards installed by the `wrapToolCall` hooks the current tool call
 * passed through (`Middleware.guardToolCall`); read by the tool step just
 * before the tool runs.
 */
import * as FiberRef from "effect/FiberRef"
import { globalValue } from "effect/GlobalValue"
import type { ToolCallGuard } from "../Middleware.js"

/** The guards of the current tool call, outermost first. */
export const toolCallGuards: FiberRef.FiberRef<ReadonlyArray<ToolCallGuard>> = globalValue(
  Symbol.for("@stepwise-agent/core/Middleware/CurrentToolCallGuards"),
  () => FiberRef.unsafeMake<ReadonlyArray<ToolCallGuard>>([])
)
