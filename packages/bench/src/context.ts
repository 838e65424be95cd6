/**
 * The issue-3 figures: what context editing and summarization cost per model
 * call as a thread grows, and how fast each `TokenCounter` method counts.
 *
 * 1. A history of N messages (a user message, then assistant tool calls each
 *    answered by a tool message with a 2 KB result) is edited as an agent
 *    thread grows: the first call sees all N messages (nothing cached), then
 *    every further call sees the previous history plus a few new messages
 *    (the same message objects, as the loop passes them). The histories are
 *    built before the clock starts, so only the edit is timed.
 *    `ContextEditing.applyEdits` (what the middleware's `wrapModelCall` runs)
 *    and `Summarization`'s `beforeModel` (with a trigger above the history, so
 *    the summarizer is never called) on the approximate counter.
 * 2. Token counting throughput on ~1 MB of mixed text (prose, code, JSON,
 *    numbers, non-ASCII) split into 2 KB messages: a first pass on a fresh
 *    counter, a second pass on the same objects (identity cache), a pass on
 *    new objects with the same text (tiktoken's piece memo warm, the
 *    identity cache cold), and plain js-tiktoken `encode().length`.
 * 3. Cold exact counting ({@link measureCold}): text never seen before by any
 *    cache, per corpus (prose, code, CJK) and encoding, for our tiktoken
 *    counter, gpt-tokenizer's `countTokens` and js-tiktoken's `encode`.
 * 4. First calls against LangChain ({@link measureFirstCalls}): the first
 *    call of `ClearToolUses` and of the summarization trigger check on a
 *    10,000-message thread, ours and LangChain's `ClearToolUsesEdit` /
 *    `summarizationMiddleware` on the same thread.
 * 5. The same policies inside the agent loop against called alone
 *    (`contextLoop.ts`): a run's first call (cold, and on a stored thread
 *    the runs before started from too) and each further step.
 *
 * @since 0.1.0
 */
import { type LanguageModel, Prompt, Response } from "@effect/ai"
import { Middleware, TokenCounter } from "@stepwise-agent/core"
import { ContextEditing, Summarization } from "@stepwise-agent/middleware"
import { Context, Effect, Option } from "effect"
import { getEncoding } from "js-tiktoken"
import {
  AIMessage,
  type BaseMessage,
  ClearToolUsesEdit,
  contextEditingMiddleware,
  HumanMessage,
  summarizationMiddleware,
  ToolMessage
} from "langchain"
import { createRequire } from "node:module"
import { dirname, join } from "node:path"
import { performance } from "node:perf_hooks"
import { pathToFileURL } from "node:url"
import { type LoopRow, measureInLoop } from "./contextLoop.js"
import { ScriptedChatModel } from "./langchain.js"
import { linearFit } from "./measure.js"

/**
 * One history size, one workload.
 *
 * @since 0.1.0
 * @category models
 */
export interface GrowthRow {
  readonly what: string
  /** Messages in the history at the first call. */
  readonly messages: number
  /** Messages appended before each further call. */
  readonly appended: number
  /** µs of the first call (every message new). */
  readonly firstUs: number
  /** Median µs per further call, over batches. */
  readonly steadyUs: number
  /** Fastest batch, µs per call. */
  readonly minUs: number
  readonly calls: number
  /** Tool results cleared on the last call (context editing only). */
  readonly cleared?: number | undefined
}

/**
 * Token counting throughput of one method.
 *
 * @since 0.1.0
 * @category models
 */
export interface CountRow {
  readonly method: string
  /** MB/s (10^6 bytes of UTF-8) of the first pass on a fresh counter. */
  readonly firstMBps: number
  /** MB/s of the second pass on the same objects. */
  readonly cachedMBps: number
  /** MB/s on new objects with the same text (`undefined`: not measured). */
  readonly freshObjectsMBps?: number | undefined
  /** ms to load the ranks (first count), when it applies. */
  readonly loadMs?: number | undefined
  readonly tokens: number
}

/**
 * Exact counting of unseen text: one corpus, one encoding, one counter.
 *
 * @since 0.1.0
 * @category models
 */
export interface ColdRow {
  readonly corpus: Corpus
  readonly encoding: TokenCounter.Encoding
  readonly counter: string
  /** Median MB/s over the samples, each on text generated for it. */
  readonly mbps: number
  /** First and third quartiles of the samples' MB/s. */
  readonly q1MBps: number
  readonly q3MBps: number
  /**
   * gpt-tokenizer's time over this counter's on the same text, per sample:
   * median, first and third quartiles (above 1: this counter is faster).
   */
  readonly speedVsGptTokenizer: { readonly median: number; readonly q1: number; readonly q3: number }
  readonly tokens: number
}

/**
 * The first call of a context policy on a long thread, ours and LangChain's.
 *
 * @since 0.1.0
 * @category models
 */
export interface FirstCallRow {
  readonly what: string
  readonly messages: number
  /** Median ms of our first call (fresh counter, nothing cached). */
  readonly oursMs: number
  /** Median ms of LangChain's first call on the same thread. */
  readonly langchainMs: number
  /**
   * Median over the pairs of samples (ours, then LangChain's, taken one
   * after the other) of LangChain's time over ours.
   */
  readonly ratio: number
  /** The same three in CPU time (the process's, user and system). */
  readonly oursCpuMs: number
  readonly langchainCpuMs: number
  readonly cpuRatio: number
}

/**
 * Compaction on a long thread, destructive (or per request) against view
 * mode: the call that compacts, then the calls after it as the thread grows.
 *
 * @since 0.1.0
 * @category models
 */
export interface ViewRow {
  readonly what: string
  readonly mode: string
  /** Messages in the thread at the first call. */
  readonly messages: number
  /** ms of the first call (the one that compacts; nothing cached). */
  readonly firstMs: number
  /** Median µs per further call (beforeModel and wrapModelCall), 2 messages appended per call. */
  readonly steadyUs: number
  readonly calls: number
  /** Further calls whose request did not start with the whole previous request (a provider's cache is lost). */
  readonly prefixChanges: number
  /** Messages stored after the last call, and messages sent on it. */
  readonly stored: number
  readonly sent: number
}

/**
 * @since 0.1.0
 * @category models
 */
export interface ContextResult {
  readonly editing: ReadonlyArray<GrowthRow>
  readonly summarization: ReadonlyArray<GrowthRow>
  /** Compaction at 10,000 messages: view mode against destructive or per-request editing. */
  readonly views: ReadonlyArray<ViewRow>
  readonly counting: ReadonlyArray<CountRow>
  readonly cold: ReadonlyArray<ColdRow>
  readonly firstCalls: ReadonlyArray<FirstCallRow>
  /** The same policies inside the agent loop against called alone, at 10,000 messages (`contextLoop.ts`). */
  readonly inLoop: ReadonlyArray<LoopRow>
  /** Bytes (UTF-8) and characters of the mixed text, and the messages it was split into. */
  readonly text: { readonly bytes: number; readonly chars: number; readonly messages: number }
  readonly seconds: number
}

// ---------------------------------------------------------------------------
// histories
// ---------------------------------------------------------------------------

const resultText = (i: number): string => {
  const head = `result ${i}: `
  return head + "lorem ipsum dolor sit amet, consectetur adipiscing elit. ".repeat(40).slice(0, 2048 - head.length)
}

/**
 * Message `i` of a thread of calls of `tool`: 0 is the user, then assistant
 * call / tool result pairs (call `n` has id `call_<n>`, the arguments
 * `tool.params(n)` and the result `resultOf(n)`).
 *
 * @since 0.1.0
 * @category constructors
 */
export const threadMessage = (
  tool: { readonly name: string; readonly params: (call: number) => unknown },
  resultOf: (call: number) => string
) =>
(i: number): Prompt.Message => {
  if (i === 0) return Prompt.makeMessage("user", { content: [Prompt.makePart("text", { text: "Look things up." })] })
  const call = (i + 1) >> 1
  const id = `call_${call}`
  return i % 2 === 1
    ? Prompt.makeMessage("assistant", {
      content: [
        Prompt.makePart("tool-call", { id, name: tool.name, params: tool.params(call), providerExecuted: false })
      ]
    })
    : Prompt.makeMessage("tool", {
      content: [Prompt.makePart("tool-result", {
        id,
        name: tool.name,
        result: resultOf(call),
        isFailure: false,
        providerExecuted: false
      })]
    })
}

/** Message `i` of the histories: calls of `search` with 2 KB results. */
const messageAt = threadMessage({ name: "search", params: (call) => ({ query: `query ${call}` }) }, resultText)

/**
 * A stored thread of `size` messages for the in-loop rows (`contextLoop.ts`):
 * the growth history's first `size - 1` messages, then an answer, so that no
 * call is left open.
 *
 * @since 0.1.0
 * @category constructors
 */
export const loopThread = (size: number): ReadonlyArray<Prompt.Message> => {
  const out: Array<Prompt.Message> = []
  for (let i = 0; i < size - 1; i++) out.push(messageAt(i))
  out.push(Prompt.makeMessage("assistant", { content: [Prompt.makePart("text", { text: "Here is what I found." })] }))
  return out
}

/** The histories of calls 0..calls: `size` messages, then `appended` more per call. */
const histories = (size: number, appended: number, calls: number): Array<ReadonlyArray<Prompt.Message>> => {
  const all: Array<Prompt.Message> = []
  for (let i = 0; i < size + appended * calls; i++) all.push(messageAt(i))
  const out: Array<ReadonlyArray<Prompt.Message>> = []
  for (let k = 0; k <= calls; k++) out.push(all.slice(0, size + appended * k))
  return out
}

const us = (value: number): string =>
  value >= 10_000 ? `${(value / 1000).toFixed(1)} ms` : value >= 1000 ?
    `${(value / 1000).toFixed(2)} ms` :
    value >= 100
    ? `${value.toFixed(0)} µs`
    : `${value.toFixed(1)} µs`

const median = (values: ReadonlyArray<number>): number => {
  const sorted = [...values].sort((a, b) => a - b)
  const mid = sorted.length >> 1
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2
}

/**
 * Times `call` on each history: the first alone, the rest in batches of
 * `batch` calls (median and fastest batch).
 */
const grow = (
  call: (messages: ReadonlyArray<Prompt.Message>) => number | undefined,
  list: ReadonlyArray<ReadonlyArray<Prompt.Message>>,
  batch: number
) => {
  let t = performance.now()
  call(list[0]!)
  const firstUs = (performance.now() - t) * 1000
  const perCall: Array<number> = []
  let last: number | undefined
  for (let k = 1; k + batch <= list.length; k += batch) {
    t = performance.now()
    for (let j = k; j < k + batch; j++) last = call(list[j]!)
    perCall.push((performance.now() - t) * 1000 / batch)
  }
  return { firstUs, steadyUs: median(perCall), minUs: Math.min(...perCall), calls: list.length - 1, last }
}

const approximateCounter = () => Effect.runSync(TokenCounter.makeApproximate())

const measureEditing = (size: number, appended: number, trigger: number, calls: number): GrowthRow => {
  const list = histories(size, appended, calls)
  const edit = ContextEditing.clearToolUses({ trigger, keep: 3 })
  const counter = approximateCounter()
  const apply = (messages: ReadonlyArray<Prompt.Message>) =>
    Effect.runSync(
      ContextEditing.applyEdits([edit], messages, { systemPrompt: "You are a research assistant." }).pipe(
        Effect.provideService(TokenCounter.TokenCounter, counter)
      )
    ).cleared.length
  const r = grow(apply, list, 10)
  return {
    what: trigger >= 1e9 ? "ClearToolUses, under the trigger" : `ClearToolUses, trigger ${trigger} tokens, keep 3`,
    messages: size,
    appended,
    firstUs: r.firstUs,
    steadyUs: r.steadyUs,
    minUs: r.minUs,
    calls: r.calls,
    cleared: r.last
  }
}

/**
 * Summarization's `beforeModel` with a trigger above every history: a call
 * only checks the trigger (its summarizer is never asked), and throws if it
 * ever triggers.
 */
const untriggeredSummarization = async () => {
  // its setup needs no service (the Summarizer is read by its hooks)
  const summarization = await Effect.runPromise(
    Middleware.build(
      Summarization.middleware({ trigger: { tokens: 1_000_000_000 }, keep: { messages: 20 } })
    ) as Effect.Effect<Middleware.Middleware<{}, unknown, Summarization.Summarizer>>
  )
  const beforeModel = summarization.beforeModel!
  // never called: the trigger is above every history
  const summarizer = {} as LanguageModel.Service
  return (messages: ReadonlyArray<Prompt.Message>): undefined => {
    const context: Middleware.HookContext<{}> = {
      state: {},
      messages,
      threadId: "bench",
      step: 0,
      usage: { inputTokens: 0, outputTokens: 0, totalTokens: 0 },
      tools: [],
      resume: Option.none()
    }
    const result = Effect.runSync(
      Effect.scoped(beforeModel(context)).pipe(Effect.provideService(Summarization.Summarizer, summarizer))
    )
    if (result !== undefined) throw new Error("Summarization triggered in the benchmark")
    return undefined
  }
}

const measureSummarization = async (size: number, appended: number, calls: number): Promise<GrowthRow> => {
  const list = histories(size, appended, calls)
  const call = await untriggeredSummarization()
  const r = grow(call, list, 10)
  return {
    what: "Summarization.beforeModel, under the trigger",
    messages: size,
    appended,
    firstUs: r.firstUs,
    steadyUs: r.steadyUs,
    minUs: r.minUs,
    calls: r.calls
  }
}

// ---------------------------------------------------------------------------
// compaction as a view
// ---------------------------------------------------------------------------

/** A summarizer that answers at once, so that only the middleware is timed. */
const instantSummarizer = {
  generateText: () => Effect.succeed({ text: "The user asked for many searches; each returned a long page." })
} as unknown as LanguageModel.Service

const stubResponse: Middleware.ModelResponse = {
  message: Prompt.makeMessage("assistant", { content: [Prompt.makePart("text", { text: "ok" })] }),
  toolCalls: [],
  usage: new Response.Usage({ inputTokens: undefined, outputTokens: undefined, totalTokens: undefined }),
  finishReason: "stop"
}

/**
 * One middleware driven as the loop drives it, on a thread that grows by 2
 * messages per call: `beforeModel` (its state update kept, its messages
 * stored), then `wrapModelCall` with a `next` that records the request.
 */
const driveMiddleware = (
  mw: Middleware.Any,
  context: Context.Context<never>,
  size: number,
  calls: number
): Omit<ViewRow, "what" | "mode"> => {
  const all: Array<Prompt.Message> = []
  for (let i = 0; i < size + 2 * calls; i++) all.push(messageAt(i))
  let stored: ReadonlyArray<Prompt.Message> = all.slice(0, size)
  let state: Record<string, unknown> = mw.state === undefined ? {} : { ...mw.state.initial }
  let appendedFrom = size
  let previous: ReadonlyArray<Prompt.Message> | undefined
  let prefixChanges = 0
  let sent = 0
  /** One call; returns the ms its hooks took (the thread's growth is not timed). */
  const step = (k: number): number => {
    const started = performance.now()
    const hook = mw.beforeModel === undefined ? Effect.succeed(undefined) : mw.beforeModel({
      state,
      messages: stored,
      threadId: "bench",
      usage: { inputTokens: 0, outputTokens: 0, totalTokens: 0 },
      step: k,
      tools: [],
      resume: Option.none()
    })
    const update = Effect.runSync(Effect.scoped(hook).pipe(Effect.provide(context)) as Effect.Effect<any>)
    if (update?.state !== undefined) state = { ...state, ...update.state }
    if (update?.messages !== undefined) stored = update.messages
    let request: ReadonlyArray<Prompt.Message> = stored
    if (mw.wrapModelCall !== undefined) {
      const call = mw.wrapModelCall({
        messages: stored,
        systemPrompt: undefined,
        tools: [],
        toolChoice: "auto",
        model: undefined,
        context: Context.empty(),
        state: { ...state, messages: stored },
        threadId: "bench",
        step: k
      }, (r) => {
        request = r.messages
        return Effect.succeed(stubResponse)
      })
      Effect.runSync(Effect.scoped(call).pipe(Effect.provide(context)) as Effect.Effect<any>)
    }
    const took = performance.now() - started
    if (previous !== undefined) {
      let same = request.length >= previous.length
      for (let i = 0; same && i < previous.length; i++) {
        same = request[i] === previous[i] || sameJson(request[i]!, previous[i]!)
      }
      if (!same) prefixChanges++
    }
    previous = request
    sent = request.length
    stored = [...stored, all[appendedFrom]!, all[appendedFrom + 1]!]
    appendedFrom += 2
    return took
  }
  const firstMs = step(0)
  const perCall: Array<number> = []
  const batch = 10
  for (let k = 1; k + batch <= calls; k += batch) {
    let ms = 0
    for (let j = k; j < k + batch; j++) ms += step(j)
    perCall.push(ms * 1000 / batch)
  }
  return { messages: size, firstMs, steadyUs: median(perCall), calls, prefixChanges, stored: stored.length, sent }
}

const sameJson = (a: Prompt.Message, b: Prompt.Message): boolean => JSON.stringify(a) === JSON.stringify(b)

/**
 * Summarization (summarizing at the first call) and ClearToolUses (a
 * 400,000 token trigger, keep 3: about 15 % of the 10,000-message thread,
 * twice what its calls and placeholders take once every result is
 * cleared) on a thread of `size` messages, destructive (or per request) and
 * in view mode.
 *
 * @since 0.1.0
 * @category constructors
 */
export const measureViews = async (size: number, calls: number): Promise<ReadonlyArray<ViewRow>> => {
  const rows: Array<ViewRow> = []
  const summarizer = Context.make(Summarization.Summarizer, instantSummarizer)
  for (const mode of ["rewrite", "view"] as const) {
    const mw = await Effect.runPromise(
      Middleware.build(
        Summarization.middleware({ trigger: { messages: size }, keep: { messages: 20 }, mode })
      ) as unknown as Effect.Effect<Middleware.Any>
    )
    rows.push({
      what: "Summarization, trigger N messages, keep 20",
      mode,
      ...driveMiddleware(mw as Middleware.Any, summarizer as Context.Context<never>, size, calls)
    })
  }
  for (const [mode, clearTo] of [["request", undefined], ["view", undefined], ["view", 300_000]] as const) {
    const edit = ContextEditing.clearToolUses({
      trigger: 400_000,
      keep: 3,
      ...(clearTo === undefined ? {} : { clearTo })
    })
    const mw = ContextEditing.middleware({ edits: [edit], mode })
    rows.push({
      what: `ClearToolUses, trigger 400000 tokens, keep 3${clearTo === undefined ? "" : `, clearTo ${clearTo}`}`,
      mode,
      ...driveMiddleware(mw as Middleware.Any, Context.empty(), size, calls)
    })
  }
  return rows
}

// ---------------------------------------------------------------------------
// mixed text
// ---------------------------------------------------------------------------

const words = (
  "the of and to in is that for it as with was on be by this are or from at which an have not they but " +
  "agent model tool call result message context token window summary history thread request response stream " +
  "middleware budget counter encoding cache memory latency throughput benchmark retry fallback schema layer " +
  "service effect fiber scope queue span trace error failure success value option either record array string " +
  "because however although therefore meanwhile nevertheless furthermore whereas unless until while after before " +
  "weather forecast sunny cloudy rain temperature humidity pressure wind north south east west morning evening"
).split(" ")
const nonAscii = (
  "café naïve façade résumé Zürich São Paulo Ελληνικά Привет мир 東京 大阪 日本語のテキスト 中文文本 한국어 " +
  "العربية עברית हिन्दी ไทย emoji 🎉 🚀 ✅ — “quotes” … ±×÷ ∑∫√ €£¥"
).split(" ")

/** A deterministic generator (mulberry32). */
const random = (seed: number) => () => {
  seed = (seed + 0x6d2b79f5) | 0
  let t = Math.imul(seed ^ (seed >>> 15), 1 | seed)
  t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296
}

const mixedText = (bytes: number): Array<string> => {
  const next = random(42)
  const pick = <A>(list: ReadonlyArray<A>): A => list[Math.floor(next() * list.length)]!
  const ident = () => `${pick(words)}${pick(words).replace(/^./, (c) => c.toUpperCase())}${Math.floor(next() * 100)}`
  const prose = () => {
    const out: Array<string> = []
    for (let s = 0; s < 6; s++) {
      const sentence: Array<string> = []
      const n = 8 + Math.floor(next() * 12)
      for (let w = 0; w < n; w++) {
        const r = next()
        sentence.push(r < 0.06 ? pick(nonAscii) : r < 0.1 ? String(Math.floor(next() * 100000)) : pick(words))
      }
      out.push(sentence.join(" ").replace(/^./, (c) => c.toUpperCase()) + ".")
    }
    return out.join(" ")
  }
  const code = () => {
    const name = ident()
    return [
      `export const ${name} = (input: ${pick(["string", "number", "ReadonlyArray<string>"])}) =>`,
      `  Effect.gen(function*() {`,
      `    const ${ident()} = yield* ${ident()}.get(${Math.floor(next() * 1000)})`,
      `    if (${ident()} > ${(next() * 100).toFixed(2)}) return yield* Effect.fail(new Error("${pick(words)}"))`,
      `    return { ${pick(words)}: input, ${pick(words)}: [${Math.floor(next() * 9)}, ${Math.floor(next() * 99)}] }`,
      `  })`
    ].join("\n")
  }
  const json = () =>
    JSON.stringify(
      {
        id: `${Math.floor(next() * 1e9).toString(16)}-${Math.floor(next() * 1e6)}`,
        [pick(words)]: pick(words),
        score: Number((next() * 1000).toFixed(3)),
        tags: [pick(words), pick(nonAscii), pick(words)],
        nested: { [ident()]: next() < 0.5, count: Math.floor(next() * 1e6), at: new Date(next() * 2e12).toISOString() }
      },
      null,
      next() < 0.5 ? 2 : undefined
    )
  const numbers = () => Array.from({ length: 30 }, () => (next() * 1e6).toFixed(Math.floor(next() * 4))).join(", ")
  const kinds = [prose, prose, prose, code, code, json, json, numbers]
  const chunks: Array<string> = []
  const utf8 = new TextEncoder()
  let total = 0
  while (total < bytes) {
    let chunk = ""
    while (chunk.length < 2000) chunk += pick(kinds)() + "\n\n"
    chunks.push(chunk)
    total += utf8.encode(chunk).length
  }
  return chunks
}

const userMessages = (chunks: ReadonlyArray<string>): Array<Prompt.Message> =>
  chunks.map((text) => Prompt.makeMessage("user", { content: [Prompt.makePart("text", { text })] }))

const timeMs = async <A>(f: () => Promise<A>): Promise<{ readonly ms: number; readonly value: A }> => {
  const t = performance.now()
  const value = await f()
  return { ms: performance.now() - t, value }
}

// ---------------------------------------------------------------------------
// cold exact counting
// ---------------------------------------------------------------------------

/**
 * A corpus of the cold counting measurements.
 *
 * @since 0.1.0
 * @category models
 */
export type Corpus = "prose" | "code" | "CJK"

const cjkChars = (next: () => number, n: number): string => {
  let out = ""
  for (let i = 0; i < n; i++) {
    const r = next()
    out += r < 0.06 ? "。" : r < 0.1 ? "、" : r < 0.7
      ? String.fromCodePoint(0x4e00 + Math.floor(next() * 0x5200)) // CJK ideographs
      : r < 0.9
      ? String.fromCodePoint(0x3041 + Math.floor(next() * 0x5e)) // hiragana and katakana
      : String.fromCodePoint(0xac00 + Math.floor(next() * 0x2ba4)) // hangul
  }
  return out
}

/** Text of one corpus, generated from `seed` (a new seed is new text), cut into ~2 KB chunks. */
const corpusText = (corpus: Corpus, seed: number, bytes: number): Array<string> => {
  const next = random(seed)
  const pick = <A>(list: ReadonlyArray<A>): A => list[Math.floor(next() * list.length)]!
  const ident = () => `${pick(words)}${pick(words).replace(/^./, (c) => c.toUpperCase())}${Math.floor(next() * 1000)}`
  const sentence = () => {
    const out: Array<string> = []
    const n = 8 + Math.floor(next() * 14)
    for (let w = 0; w < n; w++) {
      out.push(next() < 0.05 ? String(Math.floor(next() * 1e6)) : pick(words))
    }
    return out.join(" ").replace(/^./, (c) => c.toUpperCase()) + pick([".", ".", ",", "?", "!", ";"]) + " "
  }
  const line = () =>
    pick([
      () => `  const ${ident()} = yield* ${ident()}.${pick(words)}(${Math.floor(next() * 1e4)}, "${pick(words)}")\n`,
      () => `  if (${ident()} >= ${(next() * 1e3).toFixed(2)}) return { ${pick(words)}: ${ident()} }\n`,
      () => `export const ${ident()} = (input: ReadonlyArray<${pick(["string", "number"])}>) =>\n`,
      () => `    // ${sentence()}\n`,
      () =>
        `  for (let i = 0; i < ${ident()}.length; i++) ${ident()}[i] += 0x${Math.floor(next() * 1e6).toString(16)}\n`
    ])()
  const piece = corpus === "prose" ? sentence : corpus === "code" ? line : () => cjkChars(next, 200)
  const utf8 = new TextEncoder()
  const chunks: Array<string> = []
  let total = 0
  while (total < bytes) {
    let chunk = ""
    while (utf8.encode(chunk).length < 2000) chunk += piece()
    chunks.push(chunk)
    total += utf8.encode(chunk).length
  }
  return chunks
}

/** What the bench uses of a gpt-tokenizer encoding module. */
interface GptTokenizerEncoding {
  readonly countTokens: (text: string, options: { readonly disallowedSpecial: Set<string> }) => number
  readonly clearMergeCache: () => void
}

/**
 * gpt-tokenizer's module for `encoding`, the very copy our counter loads
 * (resolved from `@stepwise-agent/core`): npm may install more than one copy
 * (here, another version is hoisted for `@effect/ai-openai`), and two copies
 * have two merge caches and two JIT histories.
 */
const gptTokenizerOfCore = (encoding: TokenCounter.Encoding): Promise<GptTokenizerEncoding> => {
  const fromBench = createRequire(import.meta.url)
  const fromCore = createRequire(fromBench.resolve("@stepwise-agent/core"))
  const root = dirname(fromCore.resolve("gpt-tokenizer/package.json"))
  return import(pathToFileURL(join(root, "esm", "encoding", `${encoding}.js`)).href)
}

const specialAsText = { disallowedSpecial: new Set<string>() }

const quartiles = (values: ReadonlyArray<number>) => {
  const sorted = [...values].sort((a, b) => a - b)
  const at = (p: number) => sorted[Math.round(p * (sorted.length - 1))]!
  return { median: median(values), q1: at(0.25), q3: at(0.75) }
}

/**
 * Exact counting of text that no cache has seen, paired and interleaved:
 * every sample generates new text (a new seed) and each counter counts that
 * same text, in an order that rotates from sample to sample, with
 * gpt-tokenizer's merge cache emptied before each (our counter counts with
 * the same gpt-tokenizer module, {@link gptTokenizerOfCore}). Our counter
 * counts the chunks as user messages of a fresh counter
 * (`counter.count(messages)`, whose tokens include 3 per message; the
 * messages are built before the clock starts); gpt-tokenizer runs
 * `countTokens(chunk)` and js-tiktoken `encode(chunk).length` per chunk. Our
 * count is checked against gpt-tokenizer's. One unreported sample first
 * warms the JIT. Wall time, as in the rest of the bench (the process's CPU
 * time would also count its compiler and GC threads).
 *
 * @since 0.1.0
 * @category constructors
 */
export const measureCold = async (
  options: { readonly quick: boolean; readonly log: (line: string) => void }
): Promise<ReadonlyArray<ColdRow>> => {
  const bytes = options.quick ? 100_000 : 250_000
  const samples = options.quick ? 5 : 11
  const rows: Array<ColdRow> = []
  let seed = 1000
  for (const encoding of ["cl100k_base", "o200k_base"] as const) {
    const gpt = await gptTokenizerOfCore(encoding)
    const tiktoken = getEncoding(encoding)
    // load our counter's encoding before the clock starts
    await Effect.runPromise(Effect.flatMap(TokenCounter.makeTiktoken({ encoding }), (c) => c.countText("warm up")))
    const counters: ReadonlyArray<readonly [string, (chunks: ReadonlyArray<string>) => Promise<number>]> = [
      ["ours (TokenCounter.makeTiktoken)", async (chunks) => {
        const counter = await Effect.runPromise(TokenCounter.makeTiktoken({ encoding }))
        const messages = userMessages(chunks)
        gpt.clearMergeCache()
        const t = performance.now()
        const tokens = await Effect.runPromise(counter.count(messages))
        const ms = performance.now() - t
        let check = 0
        for (const chunk of chunks) check += gpt.countTokens(chunk, specialAsText) + 3
        if (check !== tokens) throw new Error(`ours counted ${tokens}, gpt-tokenizer ${check}`)
        return ms
      }],
      ["gpt-tokenizer 4.0.0 `countTokens`", (chunks) => {
        gpt.clearMergeCache()
        const t = performance.now()
        for (const chunk of chunks) gpt.countTokens(chunk, specialAsText)
        return Promise.resolve(performance.now() - t)
      }],
      ["js-tiktoken 1.0.21 `encode().length`", (chunks) => {
        const t = performance.now()
        let tokens = 0
        for (const chunk of chunks) tokens += tiktoken.encode(chunk, [], []).length
        return Promise.resolve(tokens >= 0 ? performance.now() - t : 0)
      }]
    ]
    const gptAt = 1
    for (const corpus of ["prose", "code", "CJK"] as const) {
      const mbps = counters.map(() => [] as Array<number>)
      const speed = counters.map(() => [] as Array<number>)
      let tokens = 0
      for (let i = -1; i < samples; i++) {
        const chunks = corpusText(corpus, seed++, bytes)
        const mb = new TextEncoder().encode(chunks.join("")).length / 1e6
        const ms = new Array<number>(counters.length)
        for (let k = 0; k < counters.length; k++) {
          const j = (i + 1 + k) % counters.length
          ms[j] = await counters[j]![1](chunks)
        }
        if (i < 0) continue
        ms.forEach((time, j) => {
          mbps[j]!.push(mb / (time / 1000))
          speed[j]!.push(ms[gptAt]! / time)
        })
        if (i === 0) { for (const chunk of chunks) tokens += gpt.countTokens(chunk, specialAsText) }
      }
      counters.forEach(([counter], j) => {
        const spread = quartiles(mbps[j]!)
        const row: ColdRow = {
          corpus,
          encoding,
          counter,
          mbps: spread.median,
          q1MBps: spread.q1,
          q3MBps: spread.q3,
          speedVsGptTokenizer: quartiles(speed[j]!),
          tokens
        }
        rows.push(row)
        const vs = row.speedVsGptTokenizer
        options.log(
          `  ${encoding} ${corpus.padEnd(5)} ${counter.padEnd(38)} ${row.mbps.toFixed(2)} MB/s ` +
            `[${row.q1MBps.toFixed(2)}–${row.q3MBps.toFixed(2)}]` +
            (j === gptAt ? "" : `, ×${vs.median.toFixed(3)} gpt-tokenizer [${vs.q1.toFixed(3)}–${vs.q3.toFixed(3)}]`)
        )
      })
    }
  }
  return rows
}

// ---------------------------------------------------------------------------
// first calls against LangChain
// ---------------------------------------------------------------------------

/** The thread of {@link messageAt} as LangChain messages. */
const langchainThread = (size: number): Array<BaseMessage> => {
  const out: Array<BaseMessage> = []
  for (let i = 0; i < size; i++) {
    const call = (i + 1) >> 1
    const id = `call_${call}`
    out.push(
      i === 0
        ? new HumanMessage("Look things up.")
        : i % 2 === 1
        ? new AIMessage({
          content: "",
          tool_calls: [{ id, name: "search", args: { query: `query ${call}` }, type: "tool_call" }]
        })
        : new ToolMessage({ content: resultText(call), tool_call_id: id, name: "search" })
    )
  }
  return out
}

/**
 * The first call of a context policy on a thread of `size` messages (the
 * threads of the growth measurements), nothing cached: a fresh counter or
 * middleware and new message objects for every sample, built before the
 * clock starts. Both policies stay under their trigger, so this is the cost
 * of deciding: ours is `ContextEditing.applyEdits` with `ClearToolUses` and
 * `Summarization`'s `beforeModel` on the approximate counter; LangChain's is
 * `contextEditingMiddleware({ edits: [new ClearToolUsesEdit(…)] })`'s
 * `wrapModelCall` and `summarizationMiddleware`'s `beforeModel`, with their
 * default approximate counter (`countTokensApproximately`). Median of the
 * samples, after three unreported samples of each (one in quick mode), each on
 * a fresh thread: the code is warm, the thread is not.
 *
 * @since 0.1.0
 * @category constructors
 */
/** The wall-clock and CPU milliseconds of one sample. */
interface Sample {
  readonly wallMs: number
  readonly cpuMs: number
}

/** Starts timing a sample; the returned function ends it. */
const startSample = (): () => Sample => {
  const wall = performance.now()
  const cpu = process.cpuUsage()
  return () => {
    const used = process.cpuUsage(cpu)
    return { wallMs: performance.now() - wall, cpuMs: (used.user + used.system) / 1000 }
  }
}

export const measureFirstCalls = async (
  options: { readonly quick: boolean; readonly log: (line: string) => void; readonly size?: number | undefined }
): Promise<ReadonlyArray<FirstCallRow>> => {
  const size = options.size ?? 10_000
  const samples = options.quick ? 5 : 15
  const warmups = options.quick ? 1 : 3
  const systemPrompt = "You are a research assistant."
  const model = new ScriptedChatModel(0)

  const oursEditing = async (): Promise<Sample> => {
    const messages = histories(size, 0, 0)[0]!
    const edit = ContextEditing.clearToolUses({ trigger: 1e9, keep: 3 })
    const counter = approximateCounter()
    const end = startSample()
    const result = Effect.runSync(
      ContextEditing.applyEdits([edit], messages, { systemPrompt }).pipe(
        Effect.provideService(TokenCounter.TokenCounter, counter)
      )
    )
    const sample = end()
    if (result.cleared.length !== 0) throw new Error("ClearToolUses cleared under the trigger")
    return sample
  }
  const langchainEditing = async (): Promise<Sample> => {
    const messages = langchainThread(size)
    const middleware = contextEditingMiddleware({
      edits: [new ClearToolUsesEdit({ trigger: { tokens: 1e9 }, keep: { messages: 3 } })]
    })
    const end = startSample()
    await (middleware.wrapModelCall as any)({ messages, systemPrompt, model }, async () => new AIMessage("ok"))
    return end()
  }
  const oursSummarization = async (): Promise<Sample> => {
    const messages = histories(size, 0, 0)[0]!
    const call = await untriggeredSummarization()
    const end = startSample()
    call(messages)
    return end()
  }
  const langchainSummarization = async (): Promise<Sample> => {
    const messages = langchainThread(size)
    // (its options type resolves to `never` with this model class; the call is the documented one)
    const summarization = summarizationMiddleware as unknown as (options: unknown) => { readonly beforeModel?: unknown }
    const middleware = summarization({ model, trigger: { tokens: 1_000_000_000 }, keep: { messages: 20 } })
    const end = startSample()
    const result = await (middleware.beforeModel as any)({ messages }, { context: {} })
    const sample = end()
    if (result !== undefined) throw new Error("LangChain's summarization triggered in the benchmark")
    return sample
  }

  const rows: Array<FirstCallRow> = []
  for (
    const [what, ours, langchain] of [
      ["ClearToolUses, under the trigger", oursEditing, langchainEditing],
      ["summarization trigger check", oursSummarization, langchainSummarization]
    ] as const
  ) {
    // the code warmed up on other threads (a first call in an app whose other threads ran): a cold thread, not
    // a cold JIT
    for (let i = 0; i < warmups; i++) {
      await ours()
      await langchain()
    }
    // interleaved, so that both sides of a pair see the same load (other processes, the heap's state)
    const oursSamples: Array<Sample> = []
    const langchainSamples: Array<Sample> = []
    for (let i = 0; i < samples; i++) {
      oursSamples.push(await ours())
      langchainSamples.push(await langchain())
    }
    const of = (list: ReadonlyArray<Sample>, key: keyof Sample) => median(list.map((sample) => sample[key]))
    const ratioOf = (key: keyof Sample) =>
      median(oursSamples.map((sample, i) => langchainSamples[i]![key] / Math.max(sample[key], 0.001)))
    const row: FirstCallRow = {
      what,
      messages: size,
      oursMs: of(oursSamples, "wallMs"),
      langchainMs: of(langchainSamples, "wallMs"),
      ratio: ratioOf("wallMs"),
      oursCpuMs: of(oursSamples, "cpuMs"),
      langchainCpuMs: of(langchainSamples, "cpuMs"),
      cpuRatio: ratioOf("cpuMs")
    }
    rows.push(row)
    options.log(
      `  ${what.padEnd(34)} N=${size}  first call: ours ${row.oursMs.toFixed(2)} ms, LangChain ${
        row.langchainMs.toFixed(2)
      } ms (pairs: ${row.ratio.toFixed(1)}×); CPU: ours ${row.oursCpuMs.toFixed(2)} ms, LangChain ${
        row.langchainCpuMs.toFixed(2)
      } ms (pairs: ${row.cpuRatio.toFixed(1)}×)`
    )
  }
  return rows
}

// ---------------------------------------------------------------------------
// measure
// ---------------------------------------------------------------------------

/**
 * Runs the measurements (about 20 s; `quick`: a quarter of the text and
 * fewer calls).
 *
 * @since 0.1.0
 * @category constructors
 */
export const measure = async (
  options: { readonly quick: boolean; readonly log: (line: string) => void }
): Promise<ContextResult> => {
  const started = performance.now()
  const { log, quick } = options
  const sizes = [100, 1000, 10_000]
  const calls = quick ? 100 : 400

  // token counting first, so that tiktoken's piece memo is cold on the first pass
  const chunks = mixedText(quick ? 250_000 : 1_000_000)
  const text = chunks.join("")
  const bytes = new TextEncoder().encode(text).length
  const mb = bytes / 1e6
  const counting: Array<CountRow> = []
  const methods = [
    ["approximate (4 chars/token)", () => TokenCounter.makeApproximate()],
    ["tiktoken cl100k_base", () => TokenCounter.makeTiktoken({ encoding: "cl100k_base" })],
    ["tiktoken o200k_base", () => TokenCounter.makeTiktoken({ encoding: "o200k_base" })]
  ] as const
  for (const [method, make] of methods) {
    const load = await timeMs(() => Effect.runPromise(Effect.flatMap(make(), (c) => c.countText("warm up"))))
    const counter = await Effect.runPromise(make())
    const messages = userMessages(chunks)
    const first = await timeMs(() => Effect.runPromise(counter.count(messages)))
    const cached = await timeMs(() => Effect.runPromise(counter.count(messages)))
    if (cached.value !== first.value) throw new Error(`${method}: the cached count differs`)
    const other = await Effect.runPromise(make())
    const fresh = await timeMs(() => Effect.runPromise(other.count(userMessages(chunks))))
    const row: CountRow = {
      method,
      firstMBps: mb / (first.ms / 1000),
      cachedMBps: mb / (cached.ms / 1000),
      freshObjectsMBps: method.startsWith("tiktoken") ? mb / (fresh.ms / 1000) : undefined,
      loadMs: method.startsWith("tiktoken") ? load.ms : undefined,
      tokens: first.value
    }
    counting.push(row)
    log(
      `  ${method.padEnd(28)} first ${row.firstMBps.toFixed(2)} MB/s, cached ${row.cachedMBps.toFixed(0)} MB/s` +
        (row.freshObjectsMBps === undefined ? "" : `, new objects ${row.freshObjectsMBps.toFixed(2)} MB/s`) +
        `, ${row.tokens} tokens`
    )
  }
  {
    const encoder = getEncoding("cl100k_base")
    const run = () => {
      let tokens = 0
      for (const chunk of chunks) tokens += encoder.encode(chunk).length
      return Promise.resolve(tokens)
    }
    const first = await timeMs(run)
    const second = await timeMs(run)
    counting.push({
      method: "js-tiktoken `encode().length`, cl100k_base",
      firstMBps: mb / (first.ms / 1000),
      cachedMBps: mb / (second.ms / 1000),
      tokens: first.value
    })
    log(
      `  js-tiktoken encode cl100k     first ${(mb / (first.ms / 1000)).toFixed(2)} MB/s, again ${
        (mb / (second.ms / 1000)).toFixed(2)
      } MB/s, ${first.value} tokens`
    )
  }

  const cold = await measureCold(options)

  // warm the JIT on a small thread (not reported)
  // (the code takes a few thousand calls to settle)
  measureEditing(100, 2, 10_000, 2000)
  measureEditing(100, 20, 10_000, 300)
  measureEditing(100, 2, 1e9, 2000)
  await measureSummarization(100, 2, 2000)

  const editing: Array<GrowthRow> = []
  const summarization: Array<GrowthRow> = []
  const show = (row: GrowthRow) =>
    log(
      `  ${row.what.padEnd(44)} N=${String(row.messages).padStart(5)} +${row.appended}/call  first ${
        us(row.firstUs).padStart(8)
      }  steady ${us(row.steadyUs).padStart(8)}/call` + (row.cleared === undefined ? "" : `  cleared ${row.cleared}`)
    )
  for (const trigger of [10_000, 1e9]) {
    for (const appended of trigger === 1e9 ? [2] : [2, 20]) {
      for (const size of sizes) {
        const row = measureEditing(size, appended, trigger, calls)
        editing.push(row)
        show(row)
      }
    }
  }
  for (const size of sizes) {
    const row = await measureSummarization(size, 2, calls)
    summarization.push(row)
    show(row)
  }
  await measureViews(1000, 100) // warm up
  const views = await measureViews(10_000, calls)
  for (const row of views) {
    log(
      `  ${row.what.padEnd(52)} ${row.mode.padEnd(8)} N=${row.messages}  first ${row.firstMs.toFixed(2)} ms  ` +
        `steady ${us(row.steadyUs)}/call  prefix changes ${row.prefixChanges}/${row.calls - 1}  ` +
        `stored ${row.stored}, sent ${row.sent}`
    )
  }
  const firstCalls = await measureFirstCalls(options)
  const inLoop = await measureInLoop({ thread: loopThread, runs: quick ? 5 : 11, steps: quick ? 10 : 20, log })
  return {
    editing,
    summarization,
    views,
    counting,
    cold,
    firstCalls,
    inLoop,
    text: { bytes, chars: text.length, messages: chunks.length },
    seconds: (performance.now() - started) / 1000
  }
}

// ---------------------------------------------------------------------------
// render
// ---------------------------------------------------------------------------

const table = (head: ReadonlyArray<string>, rows: ReadonlyArray<ReadonlyArray<string>>): string =>
  [
    `| ${head.join(" | ")} |`,
    `|${head.map((_, i) => (i === 0 ? "---" : "---:")).join("|")}|`,
    ...rows.map((row) => `| ${row.join(" | ")} |`)
  ].join("\n")

const scaling = (rows: ReadonlyArray<GrowthRow>): string => {
  const fit = linearFit(rows.map((r) => r.messages), rows.map((r) => r.steadyUs))
  const ratio = rows.at(-1)!.steadyUs / rows[0]!.steadyUs
  const firstRatio = rows.at(-1)!.firstUs / rows[0]!.firstUs
  return `steady state ${us(fit.intercept)} + ${(fit.slope * 1000).toFixed(2)} ns × history length ` +
    `(${ratio.toFixed(1)}× from ${rows[0]!.messages} to ${rows.at(-1)!.messages} messages, against ` +
    `${firstRatio.toFixed(0)}× for the first call)`
}

const growthTable = (rows: ReadonlyArray<GrowthRow>, withCleared: boolean) =>
  table(
    [
      "workload",
      "history",
      "new / call",
      "first call",
      "steady µs / call (median)",
      "fastest batch",
      ...(withCleared ? ["cleared at last call"] : [])
    ],
    rows.map((r) => [
      r.what,
      r.messages.toLocaleString("en-US"),
      String(r.appended),
      us(r.firstUs),
      us(r.steadyUs),
      us(r.minUs),
      ...(withCleared ? [r.cleared === undefined ? "—" : r.cleared.toLocaleString("en-US")] : [])
    ])
  )

/**
 * Renders the section of `docs/benchmarks.md`.
 *
 * @since 0.1.0
 * @category constructors
 */
export const render = (result: ContextResult): string => {
  const groups = new Map<string, Array<GrowthRow>>()
  for (const row of result.editing) {
    const key = `${row.what} (+${row.appended}/call)`
    groups.set(key, [...(groups.get(key) ?? []), row])
  }
  const lines = [
    "Histories of N messages: a user message, then assistant tool calls each answered by a tool message with a " +
    "2 KB result. The first call sees all N messages with nothing cached; each further call sees the previous " +
    "history plus a few new messages (the same message objects, as the loop passes them), so this is how a long " +
    "thread grows. The histories are built before the clock starts. `ContextEditing.applyEdits` is what the " +
    "middleware's `wrapModelCall` runs (approximate counter, system prompt included); `Summarization`'s " +
    "`beforeModel` runs with a trigger above the history (the summarizer is never called). Wall clock, " +
    "batches of 10 calls, median over the batches after the first call, after a JIT warm-up of a few thousand calls " +
    "on a 100-message thread.",
    "",
    growthTable(result.editing, true),
    "",
    growthTable(result.summarization, false),
    "",
    "Scaling (least squares over the three sizes):",
    "",
    ...[...groups].map(([key, rows]) => `- ${key}: ${scaling(rows)}.`),
    `- ${result.summarization[0]!.what} (+2/call): ${scaling(result.summarization)}.`,
    "",
    "The first call tokenizes and indexes the whole history, so it grows with N; after it, a call only " +
    "counts and indexes the new messages. What stays linear in the history is pointer work: finding by " +
    "identity how many of the remembered messages still start the history (these histories are slices the " +
    "agent did not make, so they are compared; the agent's own arrays are related by its records, see the " +
    "in-loop table below), and (when results are cleared) copying the array of messages sent to the model; the " +
    "slope above is that cost per message of history.",
    "",
    "### Token counting throughput",
    "",
    `${(result.text.bytes / 1e6).toFixed(2)} MB (UTF-8; ${result.text.chars.toLocaleString("en-US")} characters) of ` +
    "generated mixed text — English-like prose with numbers and some non-ASCII words (accents, Cyrillic, CJK, " +
    `Arabic, emoji), TypeScript, JSON, lists of numbers — split into ${result.text.messages} user messages of ` +
    "~2 KB, counted with `counter.count(messages)`. **First pass**: a fresh counter (tiktoken's ranks already " +
    "loaded, its piece memo empty: nothing else in the bench uses tiktoken before). **Cached**: the same " +
    "message objects again (identity cache). **New objects**: a fresh counter on new message objects with the " +
    "same text (identity cache cold, tiktoken's per-process piece memo warm). MB = 10^6 bytes.",
    "",
    table(
      ["method", "first pass", "cached (same objects)", "new objects, same text", "rank load", "tokens"],
      result.counting.map((r) => [
        r.method,
        `${r.firstMBps.toFixed(2)} MB/s`,
        r.method.startsWith("js-tiktoken")
          ? `${r.cachedMBps.toFixed(2)} MB/s (2nd pass, no cache)`
          : `${r.cachedMBps.toFixed(0)} MB/s`,
        r.freshObjectsMBps === undefined ? "—" : `${r.freshObjectsMBps.toFixed(2)} MB/s`,
        r.loadMs === undefined ? "—" : `${r.loadMs.toFixed(0)} ms`,
        r.tokens.toLocaleString("en-US")
      ])
    ),
    "",
    "The `tokens` column of the counters includes 3 tokens of overhead per message; js-tiktoken's is the text " +
    "alone.",
    "",
    "### Exact counting of unseen text",
    "",
    "Per corpus (English-like prose, TypeScript-like code, CJK: ideographs, kana, hangul) and encoding, text " +
    "generated for each sample (no cache has seen it), ~2 KB chunks, counted by every counter in turn (the order " +
    "rotates per sample; gpt-tokenizer's merge cache, which our counter shares, is emptied before each); ours " +
    "counts them as user messages of a fresh counter and is checked against gpt-tokenizer's count. Median MB/s " +
    "(wall time) over the samples, [first–third quartile]. The last column is gpt-tokenizer's " +
    "time over ours on the same text, per sample (median [quartiles]; above 1: ours is faster).",
    "",
    table(
      ["encoding", "corpus", ...new Set(result.cold.map((r) => r.counter)), "ours vs gpt-tokenizer"],
      [...new Set(result.cold.map((r) => `${r.encoding}|${r.corpus}`))].map((key) => {
        const [encoding, corpus] = key.split("|")
        const rows = result.cold.filter((r) => r.encoding === encoding && r.corpus === corpus)
        const vs = rows[0]!.speedVsGptTokenizer
        return [
          encoding!,
          corpus!,
          ...rows.map((r) => `${r.mbps.toFixed(2)} MB/s [${r.q1MBps.toFixed(2)}–${r.q3MBps.toFixed(2)}]`),
          `×${vs.median.toFixed(2)} [${vs.q1.toFixed(2)}–${vs.q3.toFixed(2)}]`
        ]
      })
    ),
    "",
    "### Compaction as a view, at 10,000 messages",
    "",
    "One middleware driven as the loop drives it (`beforeModel`, its update kept, then `wrapModelCall` with a " +
    "`next` that records the request), on the growth history of 10,000 messages, 2 messages appended per call. " +
    "Summarization (an instant fake summarizer) fires at the first call; ClearToolUses fires whenever the " +
    "request reaches 400,000 tokens (the thread holds ~2.6 M; its calls and placeholders ~200,000). Only the " +
    "hooks are timed, not the thread's growth. **Prefix changes**: further calls whose request does not start " +
    "with the whole previous request (each loses a provider's prompt cache), a count, not a timing.",
    "",
    table(
      ["workload", "mode", "first call", "steady", "prefix changes", "stored / sent"],
      result.views.map((r) => [
        r.what,
        r.mode,
        `${r.firstMs.toFixed(2)} ms`,
        us(r.steadyUs),
        `${r.prefixChanges} of ${r.calls - 1}`,
        `${r.stored.toLocaleString("en-US")} / ${r.sent.toLocaleString("en-US")}`
      ])
    ),
    "",
    "### First call against LangChain",
    "",
    "The first call of each policy on a thread of the growth histories above, nothing cached (fresh counter or " +
    "middleware, new message objects, built before the clock starts), under the trigger: the cost of deciding. " +
    "LangChain: `contextEditingMiddleware({ edits: [new ClearToolUsesEdit(…)] })`'s `wrapModelCall` and " +
    "`summarizationMiddleware`'s `beforeModel`, with their default approximate counter. Median of the samples " +
    "(15; 5 in quick mode), taken after three unreported samples of each side (one in quick mode), each on a fresh " +
    "thread: the code is warm, as in an app whose other threads ran, and the thread is not. The samples are taken " +
    "in pairs, ours then LangChain's, so that both sides of a pair run under the same load; the last column is the " +
    "median over the pairs of LangChain's time over ours. Wall clock, and the process's CPU time (user and " +
    "system), which a process waiting for a core on a loaded machine does not add to.",
    "",
    table(
      ["workload", "history", "ours: wall / CPU", "LangChain: wall / CPU", "LangChain / ours: wall / CPU"],
      result.firstCalls.map((r) => [
        r.what,
        r.messages.toLocaleString("en-US"),
        `${r.oursMs.toFixed(2)} / ${r.oursCpuMs.toFixed(2)} ms`,
        `${r.langchainMs.toFixed(2)} / ${r.langchainCpuMs.toFixed(2)} ms`,
        `${r.ratio.toFixed(1)}× / ${r.cpuRatio.toFixed(1)}×`
      ])
    ),
    "",
    "### In the loop against alone, at 10,000 messages",
    "",
    "The same two policies inside the agent loop (`contextLoop.ts`): an agent (raw fake model, one tool, memory " +
    "checkpointer) runs on a stored thread of 10,000 messages (the growth history, answered), each run starting " +
    "from the stored thread, as an app resuming a conversation does (a third row, a middleware that only passes " +
    "the call on, is the timing's own cost). The policy's middleware is wrapped so that " +
    "only its own time is taken (its `beforeModel`, and its `wrapModelCall` without the model call it passes " +
    "on). **Cold**: the run's first call on a thread read fresh from JSON (new objects, nothing cached). " +
    "**Stored thread**: the run's first call on the one stored copy the runs before started from too (its " +
    "messages decoded once; each run appends its own input after them, where the run before had its own). " +
    "**Step**: each further call of a run (20 tool steps; 10 in quick mode). **Alone**: a second instance of the " +
    "policy called directly on the very arrays the loop passed, right after each run (interleaved, so both see " +
    "the same load); for the cold call, a fresh instance on a fresh copy of the thread. Medians over 11 runs (5 " +
    "in quick mode). The last column is LangChain's first call on the 10,000-message thread of the previous " +
    "table over ours cold in the loop.",
    "",
    table(
      [
        "policy",
        "cold first call: loop / alone",
        "run's first call, stored thread: loop / alone",
        "step: loop / alone",
        "LangChain first call / ours cold in the loop"
      ],
      result.inLoop.map((r) => {
        const langchain = result.firstCalls.find((f) => f.what === r.what)
        return [
          r.what,
          `${r.coldLoopMs.toFixed(2)} / ${r.coldAloneMs.toFixed(2)} ms`,
          `${us(r.forkLoopMs * 1000)} / ${us(r.forkAloneMs * 1000)}`,
          `${us(r.stepLoopUs)} / ${us(r.stepAloneUs)}`,
          langchain === undefined ? "—" : `${(langchain.langchainMs / r.coldLoopMs).toFixed(1)}×`
        ]
      })
    ),
    "",
    `(This section took ${result.seconds.toFixed(0)} s.)`
  ]
  return lines.join("\n")
}
