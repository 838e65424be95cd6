import { Prompt } from "@effect/ai"
import { it } from "@effect/vitest"
import { TokenCounter } from "@stepwise-agent/core"
import { Effect } from "effect"
it.effect("scratch", () => Effect.gen(function*() {
  for (const encoding of ["o200k_base", "cl100k_base"] as const) {
    for (const engine of ["gpt-tokenizer", "js-tiktoken"] as const) {
      const counter = yield* Effect.either(TokenCounter.makeTiktoken({ encoding, engine } as any))
      if (counter._tag === "Left") { console.log("ROW skip", encoding, engine, String(counter.left)); continue }
      for (const unit of [" ", "\n", " \n", "\t ", "a ", "'s", "1", "é", "  a", "!", " !", "😀", "\u00a0", "\r\n"]) {
        const row: Array<number> = []
        for (const n of [20000, 80000]) {
          const text = unit.repeat(Math.ceil(n / unit.length)) + "a"
          const t = performance.now()
          yield* counter.right.count([Prompt.makeMessage("user", { content: [Prompt.makePart("text", { text })] })] as any).pipe(Effect.either)
          row.push(Math.round(performance.now() - t))
        }
        if (row[1]! > 50) console.log("ROW", encoding, engine, JSON.stringify(unit), row.join(" -> "))
      }
    }
  }
}), 600_000)
