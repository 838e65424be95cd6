/**
 * What `Offload`'s view costs per model call as a thread grows (run it with
 * `npx tsx packages/bench/src/offload.ts`; it prints a markdown table).
 *
 * Histories of N messages: a user message, then assistant tool calls (a
 * 3 KB argument) each answered by a tool message with a 2 KB result. The
 * middleware's `wrapModelCall` runs with `maxResultChars: 1000` (every result
 * is offloaded) and `maxArgChars: 500` (every call but the last 3 is cut),
 * and a `next` that returns a canned reply, so only the view, the store
 * writes and the state update recording the new references (carried into
 * the next call's state, as the loop does) are timed. The first call sees all N messages (nothing memoized);
 * each further call sees the previous history plus 2 new messages (the same
 * message objects, as the loop passes them). CPU time of the process
 * (`process.cpuUsage`, user + system, so other processes on the machine
 * disturb it less than the wall clock), batches of 10 calls,
 * median over the 30 batches of 300 calls, after a warm-up run of 100 calls
 * at the same size. Also counted, deterministically: the texts written to
 * the store per call.
 *
 * @since 0.1.0
 */
import type { Prompt } from "@effect/ai"
import { Middleware } from "@stepwise-agent/core"
import { Offload } from "@stepwise-agent/middleware"
import { Effect } from "effect"
import { threadMessage } from "./context.js"
import { cpuUs } from "./measure.js"

const resultText = (i: number): string => `result ${i}: ${"lorem ipsum dolor sit amet ".repeat(80)}`.slice(0, 2048)

const messageAt = threadMessage(
  { name: "write_report", params: (call) => ({ body: `report ${call} ${"x".repeat(3000)}` }) },
  resultText
)

const reply = Middleware.modelResponse("ok")

/** A fresh middleware and store, and a function running one model call through the view. */
const setup = () => {
  const store = Effect.runSync(Offload.makeMemory)
  let puts = 0
  const counting: Offload.OffloadStore.Service = {
    put: (ref, content) => Effect.zipRight(Effect.sync(() => void puts++), store.put(ref, content)),
    get: store.get
  }
  const wrap = Offload.middleware({ maxResultChars: 1000, maxArgChars: 500 }).wrapModelCall!
  // the thread's state: each call's update (the references it offloaded) is applied, as the loop does
  let state: Readonly<Record<string, unknown>> = {}
  const call = (messages: ReadonlyArray<Prompt.Message>) => {
    const response = Effect.runSync(
      wrap(
        {
          messages,
          systemPrompt: undefined,
          tools: [],
          toolChoice: "auto",
          model: undefined,
          context: undefined as any,
          state,
          threadId: "bench",
          incarnation: "5f0c2a9e81d3b746",
          step: 0
        },
        () => Effect.succeed(reply)
      ).pipe(Effect.provideService(Offload.OffloadStore, counting), Effect.scoped) as Effect.Effect<
        Middleware.ModelResponse
      >
    )
    if (response.state !== undefined) state = { ...state, ...response.state }
  }
  return { call, puts: () => puts }
}

const median = (values: ReadonlyArray<number>): number => {
  const sorted = [...values].sort((a, b) => a - b)
  const mid = sorted.length >> 1
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2
}

const measure = (size: number, calls: number) => {
  const all: Array<Prompt.Message> = []
  for (let i = 0; i < size + 2 * calls; i++) all.push(messageAt(i))
  const list = Array.from({ length: calls + 1 }, (_, k) => all.slice(0, size + 2 * k))
  const { call, puts } = setup()
  let t = cpuUs()
  call(list[0]!)
  const firstUs = cpuUs() - t
  const firstPuts = puts()
  const perCall: Array<number> = []
  for (let k = 1; k + 10 <= list.length; k += 10) {
    t = cpuUs()
    for (let j = k; j < k + 10; j++) call(list[j]!)
    perCall.push((cpuUs() - t) / 10)
  }
  return { size, firstUs, firstPuts, steadyUs: median(perCall), putsPerCall: (puts() - firstPuts) / calls }
}

const us = (value: number) => value >= 1000 ? `${(value / 1000).toFixed(2)} ms` : `${value.toFixed(1)} µs`

const rows = [100, 1_000, 10_000].map((size) => {
  measure(size, 100) // warm-up at this size
  return measure(size, 300)
})
const lines = [
  "| history | first call | texts written (first call) | steady µs / call (median) | texts written / call after |",
  "|---:|---:|---:|---:|---:|",
  ...rows.map((r) =>
    `| ${r.size.toLocaleString("en")} | ${us(r.firstUs)} | ${r.firstPuts} | ${us(r.steadyUs)} | ${r.putsPerCall} |`
  )
]

console.log(lines.join("\n"))
