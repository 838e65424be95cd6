/**
 * What would a step cost without X (or with Y), and what did it cost before
 * the restructuring? Copies `packages/core/src` (and, beside it, the durable
 * package's `packages/workflow/src`, importing that copy) into a temporary
 * directory, applies one small patch per variant (each removing one suspected
 * cost from the loop), sets an option or takes an older commit, transpiles each
 * copy to JavaScript as the package's build does, and times each in a process
 * of its own on plain node (`ablationChild.ts`: copies in one process would
 * share the Effect runtime's call sites, and slow each other down), round-robin
 * in fresh sets of processes, on the raw fake with one tool: generated,
 * streamed and durable (memory engine) runs.
 * Nothing in the repository is changed. A patch whose text is no longer in
 * the loop (because the loop changed) is reported as not applicable.
 *
 * @since 0.1.0
 */
import { fork, spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import ts from "typescript"
import type { AblationMode, Request } from "./ablationChild.js"
import { median } from "./measure.js"

/** The child's sources, transpiled with the copies: the child runs on plain node, as the built package does. */
const CHILD_SOURCES = ["ablationChild.ts", "fakes.ts"].map((file) =>
  fileURLToPath(new URL(`./${file}`, import.meta.url))
)

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
 * The core before the run became one typed machine (issue 34: a phase table,
 * the driver's locals in the run's state): old and new side by side.
 *
 * @since 0.1.0
 * @category constants
 */
export const machineRef = "3f19ca5"

/**
 * The variants measured.
 *
 * @since 0.1.0
 * @category constructors
 */
export const variants: ReadonlyArray<Variant> = [
  { name: "as is", description: "the loop unchanged (a copy, loaded the same way as the others)", patches: [] },
  {
    name: "as is, again",
    description: "a second copy of the loop unchanged: how far it reads from the first is how much the method " +
      "cannot tell apart",
    patches: []
  },
  {
    name: "before the restructuring",
    description: `the core at ${baselineRef}, before the loop was split into modules (issue 16): old and new ` +
      "loop side by side",
    patches: [],
    ref: baselineRef
  },
  {
    name: "before the phase table",
    description: `the core at ${machineRef}, before the run became one typed machine (issue 34): old and new ` +
      "driver side by side",
    patches: [],
    ref: machineRef
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
    description:
      "`inHook` without the hook cell (the `currentHook` fiber ref), its timing and `HookCompleted` events " +
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
  /** CPU µs per step (median over the process sets of the fastest batch), by `"<mode>:<middleware count>"`. */
  readonly perStep: Readonly<Record<string, number>>
  /**
   * Its cost relative to the first variant's, by the same key: the median over
   * every round of the ratio of its batch to the first variant's batch of that
   * round. Batches of one round run one after the other, so a change in the
   * machine's load hits both sides of a ratio alike; steadier than comparing
   * `perStep` figures.
   */
  readonly relative: Readonly<Record<string, number>>
  /**
   * The lowest and highest, over the process sets, of that set's median
   * ratio: how far one set of processes can read from another.
   */
  readonly relativeRange: Readonly<Record<string, readonly [number, number]>>
}

/**
 * How many fresh sets of processes time each configuration: one for a rough
 * pass (`--quick`), six otherwise.
 *
 * @since 0.1.0
 * @category constants
 */
export const processSets = (quick: boolean): number => quick ? 1 : 6

/** The CPU time a timed batch of runs takes, about. */
const BATCH_CPU_US = 10_000

/** Writes `packages/<pkg>/src` as it was at commit `ref` into `dir`. */
const copyAt = (root: string, ref: string, pkg: string, dir: string) => {
  fs.mkdirSync(dir, { recursive: true })
  const archive = spawnSync("git", ["archive", ref, `packages/${pkg}/src`], { cwd: root, maxBuffer: 1 << 28 })
  if (archive.status !== 0) throw new Error(`git archive ${ref} failed: ${archive.stderr}`)
  const unpacked = spawnSync("tar", ["-x", "--strip-components=3", "-C", dir], { input: archive.stdout })
  if (unpacked.status !== 0) throw new Error(`unpacking ${ref} failed: ${unpacked.stderr}`)
}

/** The imports of the core in the workflow copy in `dir` point at the core copy above it. */
const pointAtCopy = (dir: string) => {
  for (const file of fs.readdirSync(dir).filter((name) => name.endsWith(".ts"))) {
    const text = fs.readFileSync(path.join(dir, file), "utf8")
    fs.writeFileSync(
      path.join(dir, file),
      text.replace(/from "@stepwise-agent\/core\/([A-Za-z]+)"/g, "from \"../$1.js\"")
        .replace(/from "@stepwise-agent\/core"/g, "from \"../index.js\"")
    )
  }
}

/** Each `.ts` file of `dir` (and below) also as `.js`, transpiled to the ES2022 modules the package is built as. */
const transpile = (dir: string) => {
  for (const entry of fs.readdirSync(dir, { withFileTypes: true, recursive: true })) {
    if (!entry.isFile() || !entry.name.endsWith(".ts") || entry.name.endsWith(".d.ts")) continue
    const file = path.join(entry.parentPath, entry.name)
    const { outputText } = ts.transpileModule(fs.readFileSync(file, "utf8"), {
      compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2022 },
      fileName: file
    })
    fs.writeFileSync(file.replace(/\.ts$/, ".js"), outputText)
  }
}

/**
 * The children's V8 flags: a young generation of fixed size. V8 grows and
 * shrinks it as it sees objects survive, and a step allocates hundreds of
 * KiB, so where that sizing happened to settle moved a process's cost by
 * ±20% (two processes of one and the same copy differed that much); fixed,
 * a process's batches repeat from process to process.
 */
const CHILD_FLAGS = ["--min-semi-space-size=16", "--max-semi-space-size=16"]

/**
 * A child process holding one copy of the core, answering one request at a
 * time. It runs on plain node, as the built package does, not under the
 * TypeScript loader the bench runs under: code loaded through the loader
 * runs slower, and a core of more modules more so.
 */
const spawnVariant = async (childFile: string, dir: string) => {
  const child = fork(childFile, [dir], { execArgv: CHILD_FLAGS, stdio: ["ignore", "inherit", "inherit", "ipc"] })
  const waiting: Array<{ readonly resolve: (reply: any) => void; readonly reject: (error: Error) => void }> = []
  child.on("message", (reply) => waiting.shift()?.resolve(reply))
  child.on("exit", (code) => {
    for (const { reject } of waiting.splice(0)) reject(new Error(`an ablation child exited (${code})`))
  })
  const next = () => new Promise<any>((resolve, reject) => waiting.push({ resolve, reject }))
  await next() // loaded
  const ask = (request: Request) => {
    const reply = next()
    child.send(request)
    return reply
  }
  return { ask, close: () => child.kill() }
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
    /** Round-robin rounds of batches, per set of processes. */
    readonly rounds: number
    /** Fresh sets of processes (one per variant) each configuration is timed in. */
    readonly processes: number
    readonly modes: ReadonlyArray<AblationMode>
    readonly middleware: ReadonlyArray<number>
    readonly steps: number
    /** The variants to time (the first is the one the others are relative to); {@link variants} by default. */
    readonly variants?: ReadonlyArray<Variant> | undefined
  }
): Promise<Array<AblationResult>> => {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "stepwise-ablation-"))
  try {
    // bare imports from the copies resolve to the repository's packages (same module instances)
    fs.symlinkSync(path.join(root, "node_modules"), path.join(tmp, "node_modules"), "dir")
    // the copies load as ES modules, as the package does: as CommonJS every cross-module access would
    // go through an export getter, which costs a loop split into more modules more
    fs.writeFileSync(path.join(tmp, "package.json"), JSON.stringify({ type: "module" }))
    const childDir = path.join(tmp, "child")
    fs.mkdirSync(childDir)
    for (const source of CHILD_SOURCES) fs.copyFileSync(source, path.join(childDir, path.basename(source)))
    transpile(childDir)
    const childFile = path.join(childDir, "ablationChild.js")
    const loaded: Array<{ variant: Variant; applicable: boolean; dir: string }> = []
    for (const [index, variant] of (options.variants ?? variants).entries()) {
      const dir = path.join(tmp, `variant-${index}`)
      // the core's copy, and beside it (in workflow/) the durable package's, importing that copy
      for (const [pkg, into] of [["core", dir], ["workflow", path.join(dir, "workflow")]] as const) {
        if (variant.ref === undefined) fs.cpSync(path.join(root, "packages", pkg, "src"), into, { recursive: true })
        else copyAt(root, variant.ref, pkg, into)
      }
      pointAtCopy(path.join(dir, "workflow"))
      let applicable = variant.requires === undefined ||
        fs.readFileSync(path.join(dir, variant.requires.file), "utf8").includes(variant.requires.text)
      for (const patch of variant.patches) {
        const file = path.join(dir, patch.file)
        const text = fs.readFileSync(file, "utf8")
        if (!text.includes(patch.from)) applicable = false
        else fs.writeFileSync(file, text.replace(patch.from, patch.to))
      }
      transpile(dir)
      loaded.push({ variant, applicable, dir })
    }
    const perStep: Array<Record<string, number>> = loaded.map(() => ({}))
    const relative: Array<Record<string, number>> = loaded.map(() => ({}))
    const relativeRange: Array<Record<string, readonly [number, number]>> = loaded.map(() => ({}))
    const combinations = options.modes.flatMap((mode) => options.middleware.map((middleware) => ({ mode, middleware })))
    for (const { middleware, mode } of combinations) {
      // per variant, the fastest batch of each set of processes
      const fastest: Array<Array<number>> = loaded.map(() => [])
      // per variant, its batch ÷ the first variant's batch, for every round of every set
      const ratios: Array<Array<number>> = loaded.map(() => [])
      // per variant, the median of those ratios in each set
      const setRatios: Array<Array<number>> = loaded.map(() => [])
      // A process's cost of one configuration varies from process to process by more than the
      // variants differ (what the JIT made of it, where the heap happened to grow), so each
      // configuration is timed in `processes` fresh sets of processes, one process per variant
      // (see ablationChild.ts), all alive at once and timed round-robin.
      for (let set = 0; set < options.processes; set++) {
        const children = await Promise.all(
          loaded.map(({ applicable, dir }) => applicable ? spawnVariant(childFile, dir) : Promise.resolve(undefined))
        )
        try {
          // a batch long enough (~10 ms CPU) that a scavenge or a tick of another process is a small part of it
          // warmed up side by side (each child counts its own CPU time)
          const readies = await Promise.all(children.map((child, i) =>
            child?.ask({
              _tag: "build",
              mode,
              middleware,
              steps: options.steps,
              options: loaded[i]!.variant.options ?? {}
            })
          ))
          const runs = readies.map((ready) =>
            ready === undefined ? 0 : Math.max(4, Math.round(BATCH_CPU_US / ready.cpuPerRun))
          )
          const samples: Array<Array<number>> = children.map(() => [])
          for (let round = 0; round < options.rounds; round++) {
            for (const [i, child] of children.entries()) {
              if (child !== undefined) {
                samples[i]!.push((await child.ask({ _tag: "batch", runs: runs[i]! })).cpuPerRun)
              }
            }
          }
          // other processes only ever add CPU time (cache and core sharing): the fastest batch is the
          // steadiest estimate of what a variant costs in this process
          const base = samples[0]!
          for (const [i, values] of samples.entries()) {
            if (values.length === 0) continue
            fastest[i]!.push(Math.min(...values))
            if (base.length === 0) continue
            const inSet = values.map((value, round) => value / base[round]!)
            ratios[i]!.push(...inSet)
            setRatios[i]!.push(median(inSet))
          }
        } finally {
          for (const child of children) child?.close()
        }
      }
      // the median over the sets, so one process the JIT treated unusually well or badly does not decide
      for (const [i, values] of fastest.entries()) {
        if (values.length > 0) perStep[i]![`${mode}:${middleware}`] = median(values) / options.steps
        if (ratios[i]!.length > 0) relative[i]![`${mode}:${middleware}`] = median(ratios[i]!)
        if (setRatios[i]!.length > 0) {
          relativeRange[i]![`${mode}:${middleware}`] = [Math.min(...setRatios[i]!), Math.max(...setRatios[i]!)]
        }
      }
    }
    return loaded.map(({ applicable, variant }, i) => ({
      variant,
      applicable,
      perStep: perStep[i]!,
      relative: relative[i]!,
      relativeRange: relativeRange[i]!
    }))
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true })
  }
}
