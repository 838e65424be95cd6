/**
 * Runs only the first load of a long thread from a KeyValueStore of
 * `memory.ts` (`measureFirstLoad`), at 10, 1,000 and 10,000 messages, tiny
 * and realistic:
 * `npx tsx --conditions=@stepwise-agent/source packages/bench/src/firstLoad.ts [--quick]`.
 *
 * @since 0.1.0
 */
import { measureFirstLoad } from "./memory.js"

const quick = process.argv.includes("--quick")
for (const messageSize of ["tiny", "realistic"] as const) {
  await measureFirstLoad({
    sizes: [10, 1000, 10000],
    messageSize,
    sampling: quick
      ? { warmupMs: 100, minSampleMs: 30, samples: 3, maxSampleMs: 300 }
      : { warmupMs: 300, minSampleMs: 100, samples: 7, maxSampleMs: 2000 },
    log: (line) => console.log(line)
  })
}
