/**
 * What a run's start and end cost beside its steps: Effect operations and
 * bytes allocated for a 10-step run and for a run that only answers (no tool
 * step: the run's start and end and one model call), raw fake, generate, 0 and
 * 10 pass-through middleware; the per-step rows of `streamStep.ts` (a 10-step
 * run's figures over its 10 steps) without its timing (a few seconds):
 * `node --expose-gc --max-semi-space-size=128 --conditions=@stepwise-agent/source --import tsx
 * packages/bench/src/runEdges.ts`.
 *
 * @since 0.1.0
 */
import { Effect } from "effect"
import { makeBench } from "./fixtures.js"
import { allocated, operations } from "./measure.js"

const main = async () => {
  console.log("| middleware | 10-step run: ops / step | KiB / step | answer-only run: ops | KiB |")
  console.log("|---|---:|---:|---:|---:|")
  for (const middleware of [0, 10]) {
    const ten = await Effect.runPromise(makeBench({ model: "raw", mode: "generate", middleware, tools: 1, steps: 10 }))
    const zero = await Effect.runPromise(makeBench({ model: "raw", mode: "generate", middleware, tools: 1, steps: 0 }))
    for (let i = 0; i < 300; i++) {
      await Effect.runPromise(ten.runOnce)
      await Effect.runPromise(zero.runOnce)
    }
    const tenOps = await operations(ten.runOnce, 5, 10)
    const tenBytes = await allocated(ten.runOnce, 10, 10)
    const zeroOps = await operations(zero.runOnce, 5, 1)
    const zeroBytes = await allocated(zero.runOnce, 50, 1)
    console.log(
      `| ${middleware} | ${tenOps.toFixed(1)} | ${(tenBytes / 1024).toFixed(1)} | ${zeroOps.toFixed(1)} | ` +
        `${(zeroBytes / 1024).toFixed(1)} |`
    )
  }
}

main().catch((error) => {
  console.error(error)
  process.exit(1)
})
