import { Effect } from "effect"
import * as Pii from "./src/Pii.js"
const show = (e: Effect.Effect<any, any, any>) => Effect.runPromise(Effect.flip(e as any).pipe(Effect.map((x: any) => x.option + " :: " + x.reason), Effect.orElseSucceed(() => "ok"))).then(console.log, console.log)
for (const o of [{ types: [{ name: "id" }], strategy: "redact" }, { types: [42], strategy: "redact" }, { types: ["email"], strategy: "erase" }, { types: [{ name: "id", pattern: /x/, flags: "g" }], strategy: "redact" }, { types: ["email"], strategy: "redact", applyToInput: "yes" }])
  await show(Pii.middleware(o as any))
