/**
 * The key, in a message's or part's provider `options`, under which the
 * built-in middleware mark what they changed (`{ "stepwise": { … } }`).
 * Providers read only their own key, so a marker never reaches a model.
 */
import type * as Prompt from "@effect/ai/Prompt"

export const markerKey = "stepwise"

/** Whether context editing cleared this tool result (or this tool call's arguments). */
export const isCleared = (part: Prompt.ToolResultPart | Prompt.ToolCallPart): boolean =>
  part.options[markerKey]?.contextEditing === "cleared"
