/**
 * The sampler: warm up, calibrate a batch that lasts at least `minSampleMs`,
 * then time several batches (wall clock with `performance.now`, CPU with
 * `process.cpuUsage`) and keep the median.
 *
 * @since 0.1.0
 */
import { Effect, Scheduler } from "effect"
import { performance } from "node:perf_hooks"
import * as v8 from "node:v8"
import * as vm from "node:vm"

/**
 * How long to sample.
 *
 * @since 0.1.0
 * @category models
 */
export interface SampleOptions {
  /** Time spent running the workload before measuring. */
  readonly warmupMs: number
  /** Each timed batch repeats the workload until it lasts at least this long. */
  readonly minSampleMs: number
  /** Timed batches; the median is reported. */
  readonly samples: number
  /** Fewer batches (but at least 3) when `samples` batches would take longer than this. */
  readonly maxSampleMs?: number | undefined
  /** What one run of the workload counts as (e.g. its steps); figures are per unit. */
  readonly unitsPerRun: number
}

/**
 * The result of sampling one workload, in microseconds per unit.
 *
 * @since 0.1.0
 * @category models
 */
export interface Sample {
  /** Median wall-clock µs per unit. */
  readonly wallUs: number
  /** Median CPU (user + system) µs per unit. */
  readonly cpuUs: number
  /** Smallest and largest wall-clock µs per unit over the timed batches. */
  readonly minUs: number
  readonly maxUs: number
  /** Runs per timed batch. */
  readonly runsPerBatch: number
  readonly batches: number
}

/**
 * The median of `values` (the mean of the middle two for an even count).
 *
 * @since 0.1.0
 * @category utils
 */
export const median = (values: ReadonlyArray<number>): number => {
  const sorted = [...values].sort((a, b) => a - b)
  const mid = sorted.length >> 1
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2
}

const repeat = (effect: Effect.Effect<void, unknown>, times: number): Effect.Effect<void, unknown> =>
  Effect.gen(function*() {
    for (let i = 0; i < times; i++) yield* effect
  })

/**
 * Samples a workload.
 *
 * @since 0.1.0
 * @category constructors
 */
export const sample = async (workload: Effect.Effect<void, unknown>, options: SampleOptions): Promise<Sample> => {
  // warm up (at least one run) and calibrate
  let runs = 0
  const warmStart = performance.now()
  while (runs < 1 || performance.now() - warmStart < options.warmupMs) {
    await Effect.runPromise(workload)
    runs++
  }
  const perRunMs = (performance.now() - warmStart) / runs
  const runsPerBatch = Math.max(1, Math.ceil(options.minSampleMs / perRunMs))
  const batches = options.maxSampleMs === undefined
    ? options.samples
    : Math.max(3, Math.min(options.samples, Math.floor(options.maxSampleMs / (perRunMs * runsPerBatch))))
  const batch = repeat(workload, runsPerBatch)
  const wall: Array<number> = []
  const cpu: Array<number> = []
  const units = runsPerBatch * options.unitsPerRun
  for (let i = 0; i < batches; i++) {
    const cpu0 = process.cpuUsage()
    const t0 = performance.now()
    await Effect.runPromise(batch)
    const t1 = performance.now()
    const used = process.cpuUsage(cpu0)
    wall.push(((t1 - t0) * 1000) / units)
    cpu.push((used.user + used.system) / units)
  }
  return {
    wallUs: median(wall),
    cpuUs: median(cpu),
    minUs: Math.min(...wall),
    maxUs: Math.max(...wall),
    runsPerBatch,
    batches
  }
}

/**
 * The least-squares slope and intercept of `ys` against `xs`.
 *
 * @since 0.1.0
 * @category utility
 */
export const linearFit = (
  xs: ReadonlyArray<number>,
  ys: ReadonlyArray<number>
): { readonly slope: number; readonly intercept: number } => {
  const n = xs.length
  const mx = xs.reduce((a, b) => a + b, 0) / n
  const my = ys.reduce((a, b) => a + b, 0) / n
  let num = 0
  let den = 0
  for (let i = 0; i < n; i++) {
    num += (xs[i]! - mx) * (ys[i]! - my)
    den += (xs[i]! - mx) ** 2
  }
  const slope = den === 0 ? 0 : num / den
  return { slope, intercept: my - slope * mx }
}

/**
 * Samples several workloads round-robin: each is warmed up and calibrated
 * alone, then every round times one batch of each, so that a change in the
 * machine's load during the measurement hits all of them alike and their
 * differences stay meaningful. Rounds: `samples`, fewer (at least 3) when a
 * round would make the whole take longer than `maxSampleMs` × workloads.
 *
 * @since 0.1.0
 * @category constructors
 */
export const sampleMany = async (
  workloads: ReadonlyArray<{ readonly effect: Effect.Effect<void, unknown>; readonly unitsPerRun: number }>,
  options: Omit<SampleOptions, "unitsPerRun">
): Promise<Array<Sample>> => {
  const calibrated: Array<{ batch: Effect.Effect<void, unknown>; runsPerBatch: number; units: number; ms: number }> = []
  for (const workload of workloads) {
    let runs = 0
    const warmStart = performance.now()
    while (runs < 1 || performance.now() - warmStart < options.warmupMs) {
      await Effect.runPromise(workload.effect)
      runs++
    }
    const perRunMs = (performance.now() - warmStart) / runs
    const runsPerBatch = Math.max(1, Math.ceil(options.minSampleMs / perRunMs))
    calibrated.push({
      batch: repeat(workload.effect, runsPerBatch),
      runsPerBatch,
      units: runsPerBatch * workload.unitsPerRun,
      ms: perRunMs * runsPerBatch
    })
  }
  const roundMs = calibrated.reduce((total, c) => total + c.ms, 0)
  const rounds = options.maxSampleMs === undefined
    ? options.samples
    : Math.max(3, Math.min(options.samples, Math.floor((options.maxSampleMs * workloads.length) / roundMs)))
  const wall: Array<Array<number>> = calibrated.map(() => [])
  const cpu: Array<Array<number>> = calibrated.map(() => [])
  for (let round = 0; round < rounds; round++) {
    for (const [i, c] of calibrated.entries()) {
      const cpu0 = process.cpuUsage()
      const t0 = performance.now()
      await Effect.runPromise(c.batch)
      const t1 = performance.now()
      const used = process.cpuUsage(cpu0)
      wall[i]!.push(((t1 - t0) * 1000) / c.units)
      cpu[i]!.push((used.user + used.system) / c.units)
    }
  }
  return calibrated.map((c, i) => ({
    wallUs: median(wall[i]!),
    cpuUs: median(cpu[i]!),
    minUs: Math.min(...wall[i]!),
    maxUs: Math.max(...wall[i]!),
    runsPerBatch: c.runsPerBatch,
    batches: rounds
  }))
}

/**
 * The garbage collector's `gc()`: the global one under `--expose-gc`, else
 * one exposed at run time.
 *
 * @since 0.1.0
 * @category utility
 */
export const getGc = (): () => void => {
  const existing = (globalThis as { gc?: () => void }).gc
  if (existing !== undefined) return existing
  v8.setFlagsFromString("--expose-gc")
  return vm.runInNewContext("gc") as () => void
}

/**
 * CPU time of this process in µs (user + system): less disturbed than the
 * wall clock by other processes.
 *
 * @since 0.1.0
 * @category utility
 */
export const cpuUs = (): number => {
  const usage = process.cpuUsage()
  return usage.user + usage.system
}

/**
 * Bytes allocated per unit by `runs` runs of `effect`: the growth of
 * `heapUsed` over a window in which no garbage collection happened (checked
 * with `v8.GCProfiler`; a window with one is retried), the median of three
 * such windows (`NaN` when 20 attempts did not give three). The young
 * generation must hold a window: run node with `--max-semi-space-size=128`.
 *
 * @since 0.1.0
 * @category utility
 */
export const allocated = async (effect: Effect.Effect<void, unknown>, runs: number, units: number): Promise<number> => {
  const gc = getGc()
  const readings: Array<number> = []
  for (let attempt = 0; attempt < 20 && readings.length < 3; attempt++) {
    gc()
    const profiler = new v8.GCProfiler()
    profiler.start()
    const before = process.memoryUsage().heapUsed
    for (let i = 0; i < runs; i++) await Effect.runPromise(effect)
    const after = process.memoryUsage().heapUsed
    if (profiler.stop().statistics.length === 0) readings.push((after - before) / (runs * units))
  }
  return readings.length === 0 ? Number.NaN : readings.sort((a, b) => a - b)[readings.length >> 1]!
}

/**
 * Effect operations per unit of `effect`: the runtime asks its scheduler
 * `shouldYield` once per operation, so a scheduler that counts the questions
 * (and answers as the default one) counts them, in every fiber the run forks
 * too. Deterministic, whatever the machine's load: the median of `runs` runs
 * after three warm-up runs.
 *
 * @since 0.1.0
 * @category utility
 */
export const operations = async (
  effect: Effect.Effect<void, unknown>,
  runs: number,
  units: number
): Promise<number> => {
  let count = 0
  const counting: Scheduler.Scheduler = {
    scheduleTask: (task, priority) => Scheduler.defaultScheduler.scheduleTask(task, priority),
    shouldYield: (fiber) => {
      count++
      return Scheduler.defaultScheduler.shouldYield(fiber)
    }
  }
  const counted = Effect.withScheduler(effect, counting)
  for (let i = 0; i < 3; i++) await Effect.runPromise(counted)
  const readings: Array<number> = []
  for (let i = 0; i < runs; i++) {
    count = 0
    await Effect.runPromise(counted)
    readings.push(count / units)
  }
  return readings.sort((a, b) => a - b)[readings.length >> 1]!
}
