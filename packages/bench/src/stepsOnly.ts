/**
 * Runs only the step on a long thread of `memory.ts` (`measureSteps`), on
 * every checkpointer, at 10, 1,000 and 10,000 messages (a few minutes, where
 * `npm run bench` takes 16):
 * `npx tsx --conditions=@stepwise-agent/source packages/bench/src/stepsOnly.ts [--quick] [--backend=…]
 * [--size=tiny|realistic] [--start=stored|grown] [--messages=N] [--system-prompt] [--alloc]`. `--size`, `--start`
 * and `--messages` (the thread lengths: 10, 1,000 and 10,000 unless given) may be given more than once (every
 * combination is measured; `tiny` and `stored` unless given). `--system-prompt` gives
 * the agent a system prompt; `--alloc` also reports the bytes a step allocates, which needs a young generation
 * that holds a run:
 * `node --max-semi-space-size=128 --import tsx --conditions=@stepwise-agent/source packages/bench/src/stepsOnly.ts --alloc`.
 *
 * @since 0.1.0
 */
import { measureSteps, type MessageSize, type ThreadStart } from "./memory.js"

const quick = process.argv.includes("--quick")
const values = (flag: string) => process.argv.filter((a) => a.startsWith(flag)).map((a) => a.slice(flag.length))
const backends = values("--backend=")
const sizes = values("--size=") as Array<MessageSize>
const starts = values("--start=") as Array<ThreadStart>
const messages = values("--messages=").map(Number)

for (const messageSize of sizes.length > 0 ? sizes : ["tiny" as const]) {
  for (const start of starts.length > 0 ? starts : ["stored" as const]) {
    await measureSteps({
      backends: backends.length > 0
        ? backends as Array<"memory">
        : ["memory", "file system", "KeyValueStore (memory)", "KeyValueStore (file system)"],
      sizes: messages.length > 0 ? messages : [10, 1000, 10000],
      steps: quick ? 20 : 100,
      sampling: quick
        ? { warmupMs: 100, minSampleMs: 30, samples: 3, maxSampleMs: 300 }
        : { warmupMs: 300, minSampleMs: 100, samples: 7, maxSampleMs: 2000 },
      log: (line) => console.log(line),
      systemPrompt: process.argv.includes("--system-prompt") ? "You are a helpful assistant." : undefined,
      allocation: process.argv.includes("--alloc"),
      messageSize,
      start
    })
  }
}
