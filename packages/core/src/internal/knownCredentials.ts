/**
 * The values known as credentials in this process (one table for every copy
 * of the package loaded): those registered (`Secrets.register`), each with
 * how many hold it, and the most recent ones a scrubbing client sent
 * (`Secrets.scrubHttpClient`). `Secrets` keeps it; what scrubbed a value once
 * reads `generation` to know whether a credential became known since.
 */
import { globalValue } from "effect/GlobalValue"
import type { Literals } from "./decodings.js"

/** The known credentials, the pattern made of them, and how often a value became known. */
export const registry = globalValue(Symbol.for("@stepwise-agent/core/Secrets/registry"), () => ({
  holders: new Map<string, number>(),
  sent: new Set<string>(),
  pattern: undefined as Literals | undefined,
  stale: false,
  /** Grows each time a value becomes known: a value scrubbed at an earlier generation may hold one. */
  generation: 0
}))
