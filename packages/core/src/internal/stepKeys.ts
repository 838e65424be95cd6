/**
 * Names the steps of one run for its journal, in the order the run takes
 * them: the n-th checkpoint, the n-th look into the inbox, the n-th call with an id. A replay takes the same
 * steps in the same order, so it gets the same names.
 */
import type * as Prompt from "@effect/ai/Prompt"
import type * as AiTool from "@effect/ai/Tool"
import { StepKey, stepName } from "../RunJournal.js"
import * as ToolEffect from "../ToolEffect.js"

const { Checkpoint, Inbox, Model, Tool } = StepKey
const load = StepKey.Load()

export class StepKeys {
  private checkpoints = 0
  private inboxes = 0
  private readonly calls = new Map<string, number>()

  load(): StepKey.Load {
    return load
  }

  checkpoint(): StepKey.Checkpoint {
    return Checkpoint({ index: this.checkpoints++ })
  }

  inbox(): StepKey.Inbox {
    return Inbox({ index: this.inboxes++ })
  }

  model(step: number): StepKey.Model {
    return Model({ step })
  }

  /**
   * The step of the next call with the id of `call`, with its ledger entry when `tool` is not read-only, and
   * the tool's undo when it is compensatable.
   */
  tool(call: Prompt.ToolCallPart, tool: AiTool.Any | undefined, threadId: string): StepKey.Tool {
    const occurrence = (this.calls.get(call.id) ?? 0) + 1
    this.calls.set(call.id, occurrence)
    const key = Tool({ call, occurrence })
    const ledger = ToolEffect.entry({ call, tool, threadId, step: stepName(key) })
    if (ledger === undefined) return key
    const declared = tool === undefined ? undefined : ToolEffect.of(tool)
    return Tool({ call, occurrence, ledger, undo: declared?._tag === "Compensatable" ? declared.undo : undefined })
  }
}
