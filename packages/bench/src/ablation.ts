/**
 * What would a step cost without X (or with Y)? Copies `packages/core/src`
 * into a temporary directory, applies one small patch per variant (each
 * removing one suspected cost from the loop) or sets an option, loads every
 * copy side by side and times them against the unpatched copy, interleaved
 * (round-robin batches, fastest batch per variant), on the raw fake with one
 * tool.
 * Nothing in the repository is changed. A patch whose text is no longer in
 * the loop (because the loop changed) is reported as not applicable.
 *
 * @since 0.1.0
 */
import { LanguageModel } from "@effect/ai"
import { Effect, Stream } from "effect"
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { performance } from "node:perf_hooks"
import { pathToFileURL } from "node:url"
import { makeToolkit, type Mode, rawModel, type Script } from "./fixtures.js"

interface Patch {
  readonly file: string
  readonly from: string
  readonly to: string
}

/**
 * A variant of the loop.
 *
 * @since 0.1.0
 * @category models
 */
export interface Variant {
  readonly name: string
  readonly description: string
  readonly patches: ReadonlyArray<Patch>
  /** Extra `Agent.make` options. */
  readonly options?: Readonly<Record<string, unknown>> | undefined
  /** Copy `packages/core/src` as it was at this git commit instead of the working tree. */
  readonly ref?: string | undefined
  /** A text the copy must contain for the variant to apply (e.g. an option it sets). */
  readonly requires?: { readonly file: string; readonly text: string } | undefined
}

const noHookReporting: Patch = {
  file: "internal/observer.ts",
  from: "  if (!observer.traced && emit === undefined) return effect",
  to: "  if (!observer.traced) return effect"
}

/**
 * The core before the restructuring of the loop (issue 16): the "as is" copy
 * against this one is the old and the new loop side by side, in one process.
 *
 * @since 0.1.0
 * @category constants
 */
export const baselineRef = "28d9d9a"

/**
 * The variants measured.
 *
 * @since 0.1.0
 * @category constructors
 */
export const variants: ReadonlyArray<Variant> = [
  { name: "as is", description: "the loop unchanged (a copy, loaded the same way as the others)", patches: [] },
  {
    name: "before the restructuring",
    description: `the core at ${baselineRef}, before the loop was split into modules (issue 16): old and new ` +
      "loop side by side",
    patches: [],
    ref: baselineRef
  },
  {
    name: "spans on",
    description: "`Agent.make({ spans: true })`: a span per hook call, model call and tool call, as with a tracer " +
      "installed (unpatched)",
    patches: [],
    options: { spans: true },
    requires: { file: "Agent.ts", text: "readonly spans?:" }
  },
  {
    name: "no hook reporting",
    description: "`inHook` without the hook cell (`Middleware.CurrentHook`), its timing and `HookCompleted` events " +
      "(all made only when streaming or watched, untraced)",
    patches: [noHookReporting]
  }
]

/**
 * The result of one variant.
 *
 * @since 0.1.0
 * @category models
 */
export interface AblationResult {
  readonly variant: Variant
  readonly applicable: boolean
  /** Median CPU µs per step, by `"<mode>:<middleware count>"`. */
  readonly perStep: Readonly<Record<string, number>>
}

/** Writes `packages/core/src` as it was at commit `ref` into `dir`. */
const copyAt = (root: string, ref: string, dir: string) => {
  fs.mkdirSync(dir, { recursive: true })
  const archive = spawnSync("git", ["archive", ref, "packages/core/src"], { cwd: root, maxBuffer: 1 << 28 })
  if (archive.status !== 0) throw new Error(`git archive ${ref} failed: ${archive.stderr}`)
  const unpacked = spawnSync("tar", ["-x", "--strip-components=3", "-C", dir], { input: archive.stdout })
  if (unpacked.status !== 0) throw new Error(`unpacking ${ref} failed: ${unpacked.stderr}`)
}

const cpuPerRun = async (effect: Effect.Effect<void, unknown>, runs: number): Promise<number> => {
  const start = process.cpuUsage()
  for (let i = 0; i < runs; i++) await Effect.runPromise(effect)
  const used = process.cpuUsage(start)
  return (used.user + used.system) / runs
}

/**
 * Runs the ablation.
 *
 * @since 0.1.0
 * @category constructors
 */
export const measure = async (
  root: string,
  options: {
    readonly rounds: number
    readonly modes: ReadonlyArray<Mode>
    readonly middleware: ReadonlyArray<number>
    readonly steps: number
  }
): Promise<Array<AblationResult>> => {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "stepwise-ablation-"))
  try {
    // bare imports from the copies resolve to the repository's packages (same module instances)
    fs.symlinkSync(path.join(root, "node_modules"), path.join(tmp, "node_modules"), "dir")
    // the copies load as ES modules, as the package does: as CommonJS every cross-module access would
    // go through an export getter, which costs a loop split into more modules more
    fs.writeFileSync(path.join(tmp, "package.json"), JSON.stringify({ type: "module" }))
    const loaded: Array<{ variant: Variant; applicable: boolean; modules: any }> = []
    for (const [index, variant] of variants.entries()) {
      const dir = path.join(tmp, `variant-${index}`)
      if (variant.ref === undefined) fs.cpSync(path.join(root, "packages", "core", "src"), dir, { recursive: true })
      else copyAt(root, variant.ref, dir)
      let applicable = variant.requires === undefined ||
        fs.readFileSync(path.join(dir, variant.requires.file), "utf8").includes(variant.requires.text)
      for (const patch of variant.patches) {
        const file = path.join(dir, patch.file)
        const text = fs.readFileSync(file, "utf8")
        if (!text.includes(patch.from)) applicable = false
        else fs.writeFileSync(file, text.replace(patch.from, patch.to))
      }
      const modules = applicable
        ? {
          Agent: await import(pathToFileURL(path.join(dir, "Agent.ts")).href),
          Middleware: await import(pathToFileURL(path.join(dir, "Middleware.ts")).href),
          Checkpointer: await import(pathToFileURL(path.join(dir, "Checkpointer.ts")).href)
        }
        : undefined
      loaded.push({ variant, applicable, modules })
    }
    const perStep: Array<Record<string, number>> = loaded.map(() => ({}))
    const combinations = options.modes.flatMap((mode) => options.middleware.map((middleware) => ({ mode, middleware })))
    for (const { middleware, mode } of combinations) {
      const runs: Array<Effect.Effect<void, unknown> | undefined> = []
      for (const { modules, variant } of loaded) {
        if (modules === undefined) {
          runs.push(undefined)
          continue
        }
        const script: Script = { toolSteps: options.steps, call: 0 }
        const build = Effect.gen(function*() {
          const checkpointer = yield* (modules.Checkpointer.makeMemory as Effect.Effect<any>)
          const { kit, layer } = makeToolkit(1)
          const mws = Array.from({ length: middleware }, (_, i) => modules.Middleware.passThrough(`pass_${i}`))
          const agent = yield* (modules.Agent.make({
            toolkit: kit,
            middleware: mws,
            maxSteps: options.steps + 1,
            ...variant.options
          }) as Effect.Effect<any, unknown, any>).pipe(
            Effect.provide(layer),
            Effect.provideService(LanguageModel.LanguageModel, rawModel(script)),
            Effect.provideService(modules.Checkpointer.Checkpointer, checkpointer)
          )
          const input = "What is the weather in Paris?"
          return Effect.suspend(() => {
            script.call = 0
            return mode === "generate"
              ? agent.run(input, { threadId: "t" }) as Effect.Effect<unknown, unknown>
              : Stream.runDrain(agent.stream(input, { threadId: "t" }) as Stream.Stream<unknown, unknown>)
          }).pipe(Effect.ensuring(Effect.orDie(checkpointer.delete("t"))), Effect.asVoid)
        })
        runs.push(await Effect.runPromise(build as Effect.Effect<Effect.Effect<void, unknown>, unknown>))
      }
      // warm up every variant (the JIT compiles on background threads, whose CPU time counts), then time
      // them round-robin so that drifts in the machine's load hit all alike
      const perBatch = mode === "generate" && middleware === 0 ? 8 : 4
      for (const run of runs) {
        if (run === undefined) continue
        const until = performance.now() + 300
        let done = 0
        while (done < 10 || performance.now() < until) {
          await Effect.runPromise(run)
          done++
        }
      }
      const samples: Array<Array<number>> = runs.map(() => [])
      for (let round = 0; round < options.rounds; round++) {
        for (const [i, run] of runs.entries()) {
          if (run !== undefined) samples[i]!.push(await cpuPerRun(run, perBatch))
        }
      }
      for (const [i, values] of samples.entries()) {
        // other processes only ever add CPU time (cache and core sharing): the fastest batch is the
        // steadiest estimate of a variant's own cost
        if (values.length > 0) perStep[i]![`${mode}:${middleware}`] = Math.min(...values) / options.steps
      }
    }
    return loaded.map(({ applicable, variant }, i) => ({ variant, applicable, perStep: perStep[i]! }))
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true })
  }
}
