/**
 * Runs only the compaction-as-a-view rows of `context.ts` (view against
 * destructive or per-request compaction at 10,000 messages):
 * `npx tsx --conditions=@stepwise-agent/source packages/bench/src/viewsOnly.ts [--quick]`.
 *
 * @since 0.1.0
 */
import { measureViews } from "./context.js"

const calls = process.argv.includes("--quick") ? 100 : 400

await measureViews(1000, 100) // warm up
for (const row of await measureViews(10_000, calls)) {
  console.log(
    `${row.what.padEnd(52)} ${row.mode.padEnd(8)} N=${row.messages}  first ${row.firstMs.toFixed(2)} ms  ` +
      `steady ${row.steadyUs.toFixed(1)} µs/call  prefix changes ${row.prefixChanges}/${row.calls - 1}  ` +
      `stored ${row.stored}, sent ${row.sent}`
  )
}
