import { Effect } from "effect"
import * as Guardrail from "./src/Guardrail.js"
import * as ToolEmulator from "./src/ToolEmulator.js"
import * as ModelCallLimit from "./src/ModelCallLimit.js"
const show = (e: Effect.Effect<any, any, any>) => Effect.runPromise(Effect.flip(e as any).pipe(Effect.map((x: any) => x.message), Effect.orElseSucceed(() => "ok"))).then(console.log, console.log)
await show(Guardrail.middleware({ input: () => Effect.succeed(Guardrail.allow), onBlock: "stop" as any }))
await show(ToolEmulator.middleware({ model: {generateText: () => 1, generateObject: () => 1} as any, tools: [""] }))
await show(ModelCallLimit.middleware({ runLimit: -1 }))
await show(ModelCallLimit.middleware({ runLimit: "x" as any }))
await show(ModelCallLimit.middleware({ runLimit: 1, maxRuns: 2 } as any))
await show(ModelCallLimit.middleware(null as any))
