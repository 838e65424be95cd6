/**
 * What a streamed step costs beside a generated one: CPU per step, timed
 * round-robin in one process (`sampleMany`), bytes allocated per step, and
 * Effect operations per step (`operations`: counted, so the same on a loaded
 * machine), for generate and stream, 0 and 10 middleware, the raw fake, the
 * encoded fake on the installed @effect/ai and on the other build
 * (`effectAi.ts`). Also the floor on the raw fake (`floor.ts`: the step's
 * work with nothing of the loop around it, so ours minus the floor is the
 * loop's own part), and a bare `generateText` / drained `streamText` per build.
 *
 * Run: `node --expose-gc --max-semi-space-size=128 --conditions=@stepwise-agent/source --import tsx
 * packages/bench/src/streamStep.ts [--quick]`.
 *
 * Allocation is the growth of `heapUsed` over a batch of runs during which
 * no garbage collection happened (checked with `v8.GCProfiler`; a batch
 * with one is retried), so the young generation must hold a batch
 * (`--max-semi-space-size=128`).
 *
 * @since 0.1.0
 */
import { Effect } from "effect"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import * as EffectAi from "./effectAi.js"
import type { Mode, ModelKind } from "./fakes.js"
import { makeBareCall, makeBench } from "./fixtures.js"
import { makeFloor } from "./floor.js"
import { allocated, operations, sampleMany } from "./measure.js"

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../..")
const quick = process.argv.includes("--quick")
const steps = 10

interface Row {
  readonly label: string
  readonly mode: Mode
  readonly middleware: number
  readonly effect: Effect.Effect<void, unknown>
  readonly units: number
}

const main = async () => {
  const builds = await EffectAi.prepare(ROOT)
  const rows: Array<Row> = []
  const models: Array<{ label: string; model: ModelKind; make: EffectAi.MakeModel | undefined }> = [
    { label: "raw", model: "raw", make: undefined },
    { label: `encoded (installed, ${builds.installed})`, model: "encoded", make: undefined },
    ...(builds.other === undefined
      ? []
      : [{ label: `encoded (${builds.other.label})`, model: "encoded" as const, make: builds.other.make }])
  ]
  for (const { label, make, model } of models) {
    for (const middleware of [0, 10]) {
      for (const mode of ["generate", "stream"] as const) {
        const bench = await Effect.runPromise(makeBench({ model, mode, middleware, tools: 1, steps }, make))
        rows.push({ label, mode, middleware, effect: bench.runOnce, units: steps })
      }
    }
  }
  for (const mode of ["generate", "stream"] as const) {
    const floor = await Effect.runPromise(makeFloor({ model: "raw", mode, steps }))
    rows.push({ label: "floor (raw)", mode, middleware: 0, effect: floor.runOnce, units: steps })
  }
  const bare: Array<Row> = []
  for (const [label, make] of [["installed", undefined], ["other", builds.other?.make]] as const) {
    if (label === "other" && make === undefined) continue
    for (const mode of ["generate", "stream"] as const) {
      bare.push({
        label: `bare generateText / streamText (${label === "installed" ? builds.installed : builds.other!.label})`,
        mode,
        middleware: 0,
        effect: await Effect.runPromise(makeBareCall(1, mode, make)),
        units: 1
      })
    }
  }
  const all = [...rows, ...bare]
  const sampling = quick
    ? { warmupMs: 200, minSampleMs: 20, samples: 5 }
    : { warmupMs: 800, minSampleMs: 40, samples: 15 }
  const timed = await sampleMany(all.map((r) => ({ effect: r.effect, unitsPerRun: r.units })), sampling)
  const bytes: Array<number> = []
  const ops: Array<number> = []
  for (const row of all) {
    bytes.push(await allocated(row.effect, row.units === 1 ? 100 : 10, row.units))
    ops.push(await operations(row.effect, 5, row.units))
  }
  console.log(`installed @effect/ai: ${builds.installed}; other build: ${builds.other?.label ?? builds.note}`)
  console.log(
    "| model | middleware | generate µs CPU | stream µs CPU | ratio | generate KiB | stream KiB | ratio | " +
      "generate ops | stream ops |"
  )
  console.log("|---|---|---|---|---|---|---|---|---|---|")
  for (let i = 0; i < all.length; i += 2) {
    const g = all[i]!
    const [tg, ts] = [timed[i]!.cpuUs, timed[i + 1]!.cpuUs]
    const [bg, bs] = [bytes[i]! / 1024, bytes[i + 1]! / 1024]
    console.log(
      `| ${g.label} | ${g.middleware} | ${tg.toFixed(0)} | ${ts.toFixed(0)} | ${(ts / tg).toFixed(2)}× | ` +
        `${bg.toFixed(1)} | ${bs.toFixed(1)} | ${(bs / bg).toFixed(2)}× | ${ops[i]!.toFixed(1)} | ` +
        `${ops[i + 1]!.toFixed(1)} |`
    )
  }
  builds.cleanup()
}

main().catch((error) => {
  console.error(error)
  process.exit(1)
})
