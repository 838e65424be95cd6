import { Effect } from "effect"
import * as RateLimit from "./src/RateLimit.js"
const show = (e: Effect.Effect<any, any, any>) => Effect.runPromise(Effect.flip(e as any).pipe(Effect.map((x: any) => x.option + " :: " + x.reason), Effect.orElseSucceed(() => "ok"))).then(console.log, console.log)
for (const o of [{ model: { limit: 0, interval: "1 second" } }, { model: { limit: 1, interval: "soon" } }, { model: { limit: 1, interval: Infinity } }, { model: { limit: 1, interval: "1 second", algorithm: "leaky" } }, { tools: { "": { limit: 1, interval: "1 second" } } }, { tools: { search: 3 } }])
  await show(RateLimit.middleware(o as any))
