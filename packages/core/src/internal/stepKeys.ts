/**
 * Names the steps of one run for its journal, in the order the run takes
 * them: the n-th checkpoint, the n-th look into the inbox, the n-th call with an id. A replay takes the same
 * steps in the same order, so it gets the same names.
 */
import type * as Prompt from "@effect/ai/Prompt"
import { StepKey } from "../RunJournal.js"

// read once: each read of a `Data.taggedEnum` member goes through a Proxy and builds a constructor
const { Checkpoint, Inbox, Model, Tool } = StepKey
const load = StepKey.Load()

export class StepKeys {
  private checkpoints = 0
  private inboxes = 0
  private readonly calls = new Map<string, number>()

  load(): StepKey {
    return load
  }

  checkpoint(): StepKey {
    return Checkpoint({ index: this.checkpoints++ })
  }

  inbox(): StepKey {
    return Inbox({ index: this.inboxes++ })
  }

  model(step: number): StepKey {
    return Model({ step })
  }

  tool(call: Prompt.ToolCallPart): StepKey {
    const occurrence = (this.calls.get(call.id) ?? 0) + 1
    this.calls.set(call.id, occurrence)
    return Tool({ call, occurrence })
  }
}
