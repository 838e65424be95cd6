/**
 * Where a step allocates: V8's sampling heap profiler (every 32 bytes,
 * objects the collector took kept in the sample) over 300 runs of a 10-step
 * run and 1,000 runs of a run that only answers (raw fake, generate, one
 * tool, 0 and 10 pass-through middleware); the KiB per step of the 10-step
 * run, the step's own (the 10-step run less the run that only answers, over
 * its 10 steps), and the core functions that allocate most of a step (each
 * sample counted to the innermost core function on its stack, Effect's and
 * Node's own functions included): `node --import tsx
 * packages/bench/src/stepAlloc.ts [--top=N]` (the core's built `dist/`).
 *
 * @since 0.1.0
 */
import { Effect } from "effect"
import * as inspector from "node:inspector/promises"
import { makeBench } from "./fixtures.js"

interface ProfileNode {
  readonly callFrame: { readonly functionName: string; readonly url: string; readonly lineNumber: number }
  readonly selfSize: number
  readonly children: ReadonlyArray<ProfileNode>
}

/** Bytes per run of `run`, in all and by the innermost core function on each sample's stack. */
const sampled = async (session: inspector.Session, run: Effect.Effect<void, unknown>, runs: number) => {
  await session.post("HeapProfiler.startSampling", {
    samplingInterval: 32,
    includeObjectsCollectedByMajorGC: true,
    includeObjectsCollectedByMinorGC: true
  } as inspector.HeapProfiler.StartSamplingParameterType)
  for (let i = 0; i < runs; i++) await Effect.runPromise(run)
  const { profile } = await session.post("HeapProfiler.stopSampling")
  const byCore = new Map<string, number>()
  const walk = (node: ProfileNode, core: string | undefined): number => {
    const { functionName, lineNumber, url } = node.callFrame
    const inCore = url.includes("/packages/core/")
      ? `${functionName || "(anonymous)"} ${url.replace(/.*\/packages\/core\//, "")}:${lineNumber + 1}`
      : core
    if (inCore !== undefined) byCore.set(inCore, (byCore.get(inCore) ?? 0) + node.selfSize / runs)
    return node.children.reduce((total, child) => total + walk(child, inCore), node.selfSize)
  }
  const total = walk(profile.head as ProfileNode, undefined) / runs
  return { total, byCore }
}

const main = async () => {
  const top = Number(process.argv.find((arg) => arg.startsWith("--top="))?.slice(6) ?? 12)
  const session = new inspector.Session()
  session.connect()
  await session.post("HeapProfiler.enable")
  for (const middleware of [0, 10]) {
    const ten = await Effect.runPromise(makeBench({ model: "raw", mode: "generate", middleware, tools: 1, steps: 10 }))
    const zero = await Effect.runPromise(makeBench({ model: "raw", mode: "generate", middleware, tools: 1, steps: 0 }))
    for (let i = 0; i < 300; i++) {
      await Effect.runPromise(ten.runOnce)
      await Effect.runPromise(zero.runOnce)
    }
    const steps = await sampled(session, ten.runOnce, 300)
    const edges = await sampled(session, zero.runOnce, 1000)
    console.log(
      `${middleware} middleware: ${(steps.total / 10240).toFixed(2)} KiB per step of a 10-step run, ` +
        `${((steps.total - edges.total) / 10240).toFixed(2)} the step's own`
    )
    const own = [...steps.byCore].map(([name, bytes]) => [name, (bytes - (edges.byCore.get(name) ?? 0)) / 10] as const)
    for (const [name, bytes] of own.sort((a, b) => b[1] - a[1]).slice(0, top)) {
      console.log(`  ${(bytes / 1024).toFixed(2).padStart(6)} KiB  ${name}`)
    }
  }
}

main().catch((error) => {
  console.error(error)
  process.exit(1)
})
