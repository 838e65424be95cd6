/**
 * Runs only the context policies' in-loop rows and their first calls against
 * LangChain (`contextLoop.ts`, `measureFirstCalls` of `context.ts`), printed:
 * `npx tsx --conditions=@stepwise-agent/source packages/bench/src/contextLoopOnly.ts [--quick]`.
 *
 * @since 0.1.0
 */
import { loopThread, measureFirstCalls } from "./context.js"
import { measureInLoop } from "./contextLoop.js"

const quick = process.argv.includes("--quick")
const log = (line: string) => console.log(line)
await measureInLoop({ thread: loopThread, runs: quick ? 5 : 11, steps: quick ? 10 : 20, log })
await measureFirstCalls({ quick, log })
