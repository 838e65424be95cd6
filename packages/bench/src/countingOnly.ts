/**
 * Runs only the cold exact counting and the first calls against LangChain of
 * `context.ts` (a minute, where `npm run bench` takes 16):
 * `npx tsx --conditions=@stepwise-agent/source packages/bench/src/countingOnly.ts [--quick]`.
 *
 * @since 0.1.0
 */
import { measureCold, measureFirstCalls } from "./context.js"

const quick = process.argv.includes("--quick")

const log = (line: string) => console.log(line)
log("cold exact counting")
await measureCold({ quick, log })
log("first calls, 10,000 messages")
await measureFirstCalls({ quick, log })
