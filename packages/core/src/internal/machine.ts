/**
 * The run's phase machine as data: the phases, what a node can end with, and
 * the `flow` table that says where each outcome leads. `next` is pure; the
 * driver in `loop.ts` only runs the phase it is given.
 */
import type * as Middleware from "../Middleware.js"

/** The nodes whose middleware hooks run in order. */
export type HookNode = "beforeAgent" | "beforeModel" | "afterModel" | "afterAgent"

/** Where a run is: a hook node (from its `index`-th hook on), a model or tool step, or the end. */
export type Phase =
  | { readonly node: HookNode; readonly index: number }
  | { readonly node: "model" }
  | { readonly node: "tools" }
  | { readonly node: "done" }

/** How a hook node ended: it ran through, a hook jumped, or a hook asked to wait. */
export type NodeOutcome =
  | { readonly _tag: "Continue" }
  | { readonly _tag: "Jump"; readonly to: Middleware.Jump }
  | {
    readonly _tag: "Interrupt"
    readonly middleware: string
    readonly index: number
    readonly value: unknown
    readonly key: string | undefined
  }

/** The one `Continue` outcome. */
export const Continue: NodeOutcome = { _tag: "Continue" }

/** What the routing depends on, read from the run when a phase ends. */
export interface Facts {
  /** The last assistant message has tool calls without results. */
  readonly callsTools: boolean
  /** The structured output was accepted. */
  readonly hasOutput: boolean
}

type Target = HookNode | "model" | "tools" | "done"
type Route = Target | ((facts: Facts) => Target)

/**
 * Where each phase leads: on `continue`, and for hook nodes on each jump. A
 * jump to "model" re-enters `beforeModel` (except from `beforeModel` itself,
 * which calls the model); a jump to "end" runs `afterAgent` once.
 */
export const flow:
  & {
    readonly [N in HookNode]: { readonly [O in "continue" | Middleware.Jump]: Route }
  }
  & {
    readonly model: { readonly continue: Route }
    readonly tools: { readonly continue: Route }
  } = {
    beforeAgent: { continue: "beforeModel", model: "beforeModel", tools: "tools", end: "afterAgent" },
    beforeModel: { continue: "model", model: "model", tools: "tools", end: "afterAgent" },
    model: { continue: "afterModel" },
    afterModel: {
      continue: (facts) => facts.callsTools ? "tools" : "afterAgent",
      model: "beforeModel",
      tools: "tools",
      end: "afterAgent"
    },
    tools: { continue: (facts) => facts.hasOutput ? "afterAgent" : "beforeModel" },
    afterAgent: { continue: "done", model: "beforeModel", tools: "tools", end: "done" }
  }

const phases: { readonly [T in Target]: Phase } = {
  beforeAgent: { node: "beforeAgent", index: 0 },
  beforeModel: { node: "beforeModel", index: 0 },
  afterModel: { node: "afterModel", index: 0 },
  afterAgent: { node: "afterAgent", index: 0 },
  model: { node: "model" },
  tools: { node: "tools" },
  done: { node: "done" }
}

/** The phase after `from` ended with `outcome` ("continue" or a jump). */
export const next = (
  from: HookNode | "model" | "tools",
  outcome: "continue" | Middleware.Jump,
  facts: Facts
): Phase => {
  const routes: Partial<Record<"continue" | Middleware.Jump, Route>> = flow[from]
  const route = routes[outcome] ?? routes.continue!
  return phases[typeof route === "function" ? route(facts) : route]
}
