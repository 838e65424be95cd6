/**
 * `src/durable.ts` run as a script (as `npm run demo -- --durable` runs it), the entry point that
 * `Durable.test.ts` bundles once and starts with plain `node` for each process of the demo.
 */
import { main } from "../src/durable.js"

main(process.argv.slice(2))
