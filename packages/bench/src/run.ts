/**
 * The benchmark: `npm run bench` (or `npx tsx packages/bench/src/run.ts`).
 *
 * Measures, on fake models (see `fixtures.ts`):
 * 1. the loop's cost per step (one model call + one tool call) with 0, 1, 5
 *    and 10 pass-through middleware (`passThrough` in `fixtures.ts`), runs of 10 and 100 steps, generate and
 *    stream, one tool;
 * 2. the same with 1, 5, 20 and 50 tools, 0 and 10 middleware, beside a bare
 *    `LanguageModel.generateText` / `streamText` and a bare `Toolkit.handle`,
 *    on the installed @effect/ai and on the other build (with the repository's
 *    patch reversed or applied, see `effectAi.ts`); LangChain JS's
 *    `createAgent` on the same workload (`langchain.ts`), for the ratio; the
 *    Vercel AI SDK 7's `ToolLoopAgent` (`aiSdk.ts`) and the floor, the cheapest
 *    Effect program doing a step's work (`floor.ts`), timed round-robin with
 *    our step (`peers.ts`); then
 *    the pieces a step is made of (`micro.ts`) and patched copies of the loop
 *    (`ablation.ts`);
 * 3. the heap held by a 10,000-message thread, and what continuing such a
 *    thread costs; one more step on threads of 10, 1,000 and 10,000 messages
 *    on each checkpointer (memory, file system, KeyValueStore; alone:
 *    `stepsOnly.ts`);
 * 4. CPU profiles (`node --cpu-prof`, in child processes) of 10 middleware
 *    and 20 tools, summarised by self time;
 * 5. context editing, summarization and token counting (`context.ts`);
 * 6. durable mode (`durable.ts`): the step on `AgentWorkflow` with the memory,
 *    SQLite and PostgreSQL engines beside the in-process loop, one activity round trip,
 *    and the time a fresh process takes to finish a run after a crash;
 * 7. streamed PII redaction on text without whitespace (`pii.ts`);
 * 8. scale in one process: idle threads and concurrent runs on one agent
 *    (`scale.ts`);
 * 9. what a steering message (`Agent.send`) adds to a step (`steering.ts`);
 * 10. a replayed and a recorded step against a live one, the size of a run
 *    record per step, and a fork of a 10,000-message thread (`replay.ts`).
 *
 * Writes the results between the markers of `docs/benchmarks.md` (the text
 * outside the markers is kept). Flags: `--quick` (short sampling, for a smoke
 * run), `--no-write` (print only), `--no-profile`, `--no-ablation`, `--no-context`,
 * `--no-langchain`, `--no-aisdk`, `--no-durable`, `--no-pii`, `--no-scale`, `--no-steering`, `--no-replay`; `--only-ablation` runs the ablation alone and prints it; `--only-durable` runs section 6 alone and prints its
 * Markdown (nothing is written).
 *
 * @since 0.1.0
 */
import { Effect } from "effect"
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import { findSourceMap } from "node:module"
import * as os from "node:os"
import * as path from "node:path"
import { performance } from "node:perf_hooks"
import { fileURLToPath } from "node:url"
import * as Ablation from "./ablation.js"
import * as Context from "./context.js"
import * as Durable from "./durable.js"
import * as EffectAi from "./effectAi.js"
import { answerDeltas, type Mode, type ModelKind } from "./fakes.js"
import { type Config, makeBareCall, makeBench, makeHandleCall } from "./fixtures.js"
import { type LangChainConfig, makeLangChainBench } from "./langchain.js"
import { getGc, sample, sampleMany, type SampleOptions } from "./measure.js"
import * as Memory from "./memory.js"
import * as Micro from "./micro.js"
import * as Peers from "./peers.js"
import * as PiiBench from "./pii.js"
import * as Profile from "./profile.js"
import * as Replay from "./replay.js"
import * as Report from "./report.js"
import * as Scale from "./scale.js"
import * as Steering from "./steering.js"

const SCRIPT = fileURLToPath(import.meta.url)
const ROOT = path.resolve(path.dirname(SCRIPT), "../../..")
const DOC = path.join(ROOT, "docs", "benchmarks.md")
const args = new Set(process.argv.slice(2))
const quick = args.has("--quick")

const log = (line: string) => console.log(line)

// ---------------------------------------------------------------------------
// profile child: run one configuration under --cpu-prof and print the window
// ---------------------------------------------------------------------------

const nowUs = () => Number(process.hrtime.bigint() / 1000n)

const profileChild = async (model: ModelKind, seconds: number, otherBuild: boolean) => {
  const builds = otherBuild ? await EffectAi.prepare(ROOT) : undefined
  const bench = await Effect.runPromise(
    makeBench({ model, mode: "generate", middleware: 10, tools: 20, steps: 10 }, builds?.other?.make)
  )
  const warmEnd = performance.now() + 1500
  while (performance.now() < warmEnd) await Effect.runPromise(bench.runOnce)
  const from = nowUs()
  const end = performance.now() + seconds * 1000
  let runs = 0
  while (performance.now() < end) {
    await Effect.runPromise(bench.runOnce)
    runs++
  }
  const to = nowUs()
  builds?.cleanup()
  console.log(JSON.stringify({ window: { from, to }, runs, steps: runs * 10 }))
}

const runProfile = (
  model: ModelKind,
  seconds: number,
  build: string | undefined
): Report.ProfileResult | undefined => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "stepwise-prof-"))
  // Node 20 rejects --cpu-prof in NODE_OPTIONS, so the flags go on the command line
  const child = spawnSync(process.execPath, [
    "--cpu-prof",
    `--cpu-prof-dir=${dir}`,
    "--cpu-prof-interval=100",
    ...process.execArgv,
    SCRIPT,
    "--profile-child",
    `--model=${model}`,
    ...(build === undefined ? [] : ["--other-build"]),
    `--seconds=${seconds}`
  ], { encoding: "utf8", cwd: ROOT, maxBuffer: 1 << 24 })
  if (child.status !== 0) {
    log(`profile child failed (${child.status}): ${child.stderr}`)
    return undefined
  }
  const line = child.stdout.trim().split("\n").filter((l) => l.startsWith("{")).at(-1)
  if (line === undefined) return undefined
  const info = JSON.parse(line) as { window: { from: number; to: number }; runs: number; steps: number }
  // the main thread's profile is the largest (the other is tsx's loader thread)
  const files = fs.readdirSync(dir).filter((f) => f.endsWith(".cpuprofile"))
    .map((f) => path.join(dir, f))
    .sort((a, b) => fs.statSync(b).size - fs.statSync(a).size)
  if (files.length === 0) return undefined
  const profile = Profile.read(files[0]!)
  const summary = Profile.summarize(profile, {
    fromUs: info.window.from,
    toUs: info.window.to,
    top: 25,
    describe: Profile.sourceMapDescriber(findSourceMap),
    inclusive: [
      { label: "`Response.Part(toolkit)`: building the reply schema", name: "Part", location: "@effect/ai/Response" },
      { label: "`goMemo`: compiling and running Schema parsers", name: "goMemo", location: "effect/ParseResult" },
      { label: "`unsafeMakeSpan`: creating a span", name: "unsafeMakeSpan", location: "effect/internal/core-effect" },
      {
        label: "`FiberRefs.updateAs`: copying the fiber-ref map (`Effect.locally`, span context)",
        name: "(anonymous)",
        location: "effect/internal/fiberRefs.js:135"
      },
      {
        label: "`Context.add`: copying the context map (span as parent)",
        name: "(anonymous)",
        location: "effect/internal/context.js:175"
      },
      { label: "`AgentState.encodeMessages` (checkpoints)", name: "encodeMessages", location: "AgentState.ts" },
      { label: "garbage collection", name: "(garbage collector)" }
    ]
  })
  fs.rmSync(dir, { recursive: true, force: true })
  return { model, build, seconds, steps: info.steps, runs: info.runs, summary }
}

// ---------------------------------------------------------------------------
// the measurements
// ---------------------------------------------------------------------------

const baseSampling: SampleOptions = quick
  ? { warmupMs: 100, minSampleMs: 30, samples: 3, maxSampleMs: 300, unitsPerRun: 1 }
  : { warmupMs: 300, minSampleMs: 100, samples: 5, maxSampleMs: 2000, unitsPerRun: 1 }

const measureConfigs = async (
  configs: ReadonlyArray<Config>,
  make?: EffectAi.MakeModel | undefined
): Promise<Array<Report.ConfigResult>> => {
  const benches = []
  for (const config of configs) {
    const bench = await Effect.runPromise(makeBench(config, make))
    const checked = await Effect.runPromise(bench.check)
    if (
      checked.steps !== config.steps + 1 || checked.toolResults !== config.steps ||
      checked.text !== answerDeltas.join("")
    ) {
      throw new Error(`configuration ${JSON.stringify(config)} did not run as scripted: ${JSON.stringify(checked)}`)
    }
    benches.push({ effect: bench.runOnce, unitsPerRun: config.steps })
  }
  const results = await sampleMany(benches, baseSampling)
  return configs.map((config, i) => {
    const result = results[i]!
    log(
      `  ${config.model.padEnd(7)} ${config.mode.padEnd(8)} mw=${String(config.middleware).padStart(2)} ` +
        `tools=${String(config.tools).padStart(2)} steps=${String(config.steps).padStart(3)}  ` +
        `${result.cpuUs.toFixed(1).padStart(8)} µs CPU/step  ${result.wallUs.toFixed(1).padStart(8)} µs wall/step`
    )
    return { config, result }
  })
}

const middlewareConfigs = (model: ModelKind): Array<Config> =>
  (["generate", "stream"] as const).flatMap((mode) =>
    [10, 100].flatMap((steps) => [0, 1, 5, 10].map((middleware) => ({ model, mode, middleware, tools: 1, steps })))
  )

const toolConfigs = (model: ModelKind, sizes: ReadonlyArray<number>): Array<Config> =>
  (["generate", "stream"] as const).flatMap((mode) =>
    [0, 10].flatMap((middleware) => sizes.map((tools) => ({ model, mode, middleware, tools, steps: 10 })))
  )

// LangChain's steps cost milliseconds: fewer batches (3), each still at least `minSampleMs`
const langchainSampling: Omit<SampleOptions, "unitsPerRun"> = quick
  ? { warmupMs: 100, minSampleMs: 30, samples: 3, maxSampleMs: 300 }
  : { warmupMs: 300, minSampleMs: 100, samples: 3, maxSampleMs: 1000 }

const langchainConfigs: Array<LangChainConfig> = (["generate", "stream"] as const).flatMap((mode) => [
  ...[0, 1, 5, 10].map((middleware) => ({ mode, middleware, tools: 1, steps: 10 })),
  ...[0, 10].flatMap((middleware) => [5, 20, 50].map((tools) => ({ mode, middleware, tools, steps: 10 })))
])

const measureLangChain = async (configs: ReadonlyArray<LangChainConfig>): Promise<Array<Report.LangChainResult>> => {
  const benches = configs.map(makeLangChainBench)
  for (const [i, config] of configs.entries()) {
    const checked = await Effect.runPromise(benches[i]!.check)
    const answer = answerDeltas.join("")
    if (
      checked.steps !== config.steps + 1 || checked.toolResults !== config.steps || checked.text !== answer ||
      (config.mode === "stream" &&
        (checked.streamedText !== answer || checked.streamedChunks !== answerDeltas.length))
    ) {
      throw new Error(
        `LangChain configuration ${JSON.stringify(config)} did not run as scripted: ${JSON.stringify(checked)}`
      )
    }
  }
  // warm up LangChain's code paths once, as `main` does for ours, before the first configuration is timed
  const warm = configs.flatMap((c, i) => c.tools === 1 && (c.middleware === 0 || c.middleware === 10) ? [i] : [])
  const until = performance.now() + (quick ? 400 : 1500)
  for (let round = 0; performance.now() < until; round++) {
    await Effect.runPromise(benches[warm[round % warm.length]!]!.runOnce)
  }
  const results = await sampleMany(
    benches.map((bench, i) => ({ effect: bench.runOnce, unitsPerRun: configs[i]!.steps })),
    langchainSampling
  )
  return configs.map((config, i) => {
    const result = results[i]!
    log(
      `  langchain ${config.mode.padEnd(8)} mw=${String(config.middleware).padStart(2)} ` +
        `tools=${String(config.tools).padStart(2)} steps=${String(config.steps).padStart(3)}  ` +
        `${result.cpuUs.toFixed(1).padStart(8)} µs CPU/step  ${result.wallUs.toFixed(1).padStart(8)} µs wall/step`
    )
    return { config, result }
  })
}

const measureBare = async (
  build: string,
  make: EffectAi.MakeModel | undefined,
  withHandle: boolean
): Promise<Array<Report.BareResult>> => {
  const out: Array<Report.BareResult> = []
  for (const mode of ["generate", "stream"] as Array<Mode>) {
    for (const tools of [0, 1, 5, 20, 50]) {
      const call = await Effect.runPromise(makeBareCall(tools, mode, make))
      const result = await sample(call, baseSampling)
      log(
        `  bare ${mode.padEnd(8)} tools=${String(tools).padStart(2)} (${build})  ` +
          `${result.cpuUs.toFixed(1).padStart(8)} µs CPU`
      )
      out.push({ what: mode === "generate" ? "generateText" : "streamText", build, tools, result })
    }
  }
  if (!withHandle) return out
  for (const tools of [1, 50]) {
    const call = await Effect.runPromise(makeHandleCall(tools))
    const result = await sample(call, baseSampling)
    log(`  Toolkit.handle tools=${String(tools).padStart(2)}  ${result.cpuUs.toFixed(1).padStart(8)} µs CPU`)
    out.push({ what: "Toolkit.handle", build, tools, result })
  }
  return out
}

// ---------------------------------------------------------------------------
// main
// ---------------------------------------------------------------------------

const main = async () => {
  const started = performance.now()
  const section = (title: string) => log(`${title}  [${((performance.now() - started) / 1000).toFixed(0)} s]`)
  const machine = Report.describeMachine(ROOT)
  log(`Stepwise benchmark — ${machine.cpu}, ${machine.cores} cores, node ${machine.node}`)
  log(`load average at start: ${machine.loadStart.map((l) => l.toFixed(2)).join(" ")}`)

  // a first configuration would otherwise pay for the JIT warming up the shared code
  for (const model of ["encoded", "raw"] as const) {
    for (const mode of ["generate", "stream"] as const) {
      const bench = await Effect.runPromise(makeBench({ model, mode, middleware: 1, tools: 1, steps: 10 }))
      const until = performance.now() + (quick ? 200 : 600)
      while (performance.now() < until) await Effect.runPromise(bench.runOnce)
    }
  }
  section("1. middleware (1 tool)")
  // each model's configurations are timed round-robin (see `sampleMany`)
  const middlewareEncoded = await measureConfigs(middlewareConfigs("encoded"))
  const middlewareRaw = await measureConfigs(middlewareConfigs("raw"))
  section("2. toolkit size (10 steps)")
  const toolsEncoded = await measureConfigs(toolConfigs("encoded", [1, 5, 20, 50]))
  // the loop itself does not depend on the toolkit size (the raw fake shows it): the ends are enough
  const toolsRaw = await measureConfigs(toolConfigs("raw", [1, 50]))
  const langchain = args.has("--no-langchain") ? undefined : await (async () => {
    section("   LangChain JS createAgent, same workload")
    return measureLangChain(langchainConfigs)
  })()
  const peers = args.has("--no-aisdk") ? undefined : await (async () => {
    section("   Vercel AI SDK 7 ToolLoopAgent and the floor, interleaved with ours")
    return Peers.measure({ quick, aiVersion: machine.versions["ai7"] ?? "?", log })
  })()
  // the other build of @effect/ai (as published, or patched): the tool table's generate rows, and bare calls
  const builds = await EffectAi.prepare(ROOT)
  const installedBuild = `installed, ${builds.installed}`
  log(`   @effect/ai: installed copy ${builds.installed}; other build: ${builds.other?.label ?? builds.note}`)
  const toolsOther = builds.other === undefined ? [] : await measureConfigs(
    [0, 10].flatMap((middleware) =>
      [1, 5, 20, 50].map((tools) => ({
        model: "encoded" as const,
        mode: "generate" as const,
        middleware,
        tools,
        steps: 10
      }))
    ),
    builds.other.make
  )
  section("   bare @effect/ai calls")
  const bare = [
    ...await measureBare(installedBuild, undefined, true),
    ...(builds.other === undefined ? [] : await measureBare(builds.other.label, builds.other.make, false))
  ]
  section("   pieces of a step")
  const micro = await Micro.measure({ ...baseSampling, warmupMs: baseSampling.warmupMs / 2, minSampleMs: 50 })
  section("   ablation: the loop without one cost at a time (patched copies of core, interleaved)")
  const ablation = args.has("--no-ablation") ? [] : await ablate()
  for (const a of ablation) {
    log(`  ${a.variant.name.padEnd(28)} ${a.applicable ? JSON.stringify(a.perStep) : "not applicable"}`)
  }
  section("3. memory")
  const memory = await Memory.measure(getGc(), quick ? 999 : 4999, baseSampling)
  log(
    `  ${memory.messages} messages: ${(memory.decodedBytes / 2 ** 20).toFixed(1)} MiB decoded, ` +
      `${(memory.encodedBytes / 2 ** 20).toFixed(1)} MiB encoded, held after a run ` +
      `${(memory.heldBytes / 2 ** 20).toFixed(1)} MiB; answer-only run ${
        (memory.answerRun.cpuUs / 1000).toFixed(0)
      } ms, ` +
      `step on the thread ${memory.stepUs.toFixed(0)} µs`
  )
  const { unitsPerRun: _units, ...stepSampling } = baseSampling
  const steps = await Memory.measureSteps({
    backends: ["memory", "file system", "KeyValueStore (memory)", "KeyValueStore (file system)"],
    sizes: quick ? [10, 1000] : [10, 1000, 10000],
    steps: quick ? 20 : 100,
    sampling: stepSampling,
    log
  })
  // flat threads: every combination of message size and start on the memory and KeyValueStore checkpointers
  const flatSteps: Array<Memory.StepResult> = []
  for (const messageSize of ["tiny", "realistic"] as const) {
    for (const start of ["stored", "grown"] as const) {
      flatSteps.push(
        ...(await Memory.measureSteps({
          backends: ["memory", "KeyValueStore (memory)"],
          sizes: quick ? [10, 1000] : [10, 10000],
          steps: quick ? 20 : 100,
          sampling: stepSampling,
          log,
          messageSize,
          start
        }))
      )
    }
  }
  const firstLoad: Array<Memory.FirstLoadResult> = []
  for (const messageSize of ["tiny", "realistic"] as const) {
    firstLoad.push(
      ...(await Memory.measureFirstLoad({
        sizes: quick ? [10, 1000] : [10, 10000],
        messageSize,
        sampling: stepSampling,
        log
      }))
    )
  }
  const context = args.has("--no-context") ? undefined : await (async () => {
    section("5. context editing, summarization and token counting")
    return Context.measure({ quick, log })
  })()
  const durable = args.has("--no-durable") ? undefined : await (async () => {
    section("6. durable mode (memory, SQLite and PostgreSQL engines, crash and resume)")
    const { unitsPerRun: _, ...sampling } = baseSampling
    return Durable.measure({ quick, sampling, log })
  })()
  const pii = args.has("--no-pii") ? undefined : (() => {
    section("7. streamed PII redaction")
    return PiiBench.measure({ quick, log })
  })()
  const scale = args.has("--no-scale") ? undefined : await (async () => {
    section("8. scale: idle threads and concurrent runs")
    return Scale.measure({ gc: getGc(), quick, log })
  })()
  const steering = args.has("--no-steering") ? undefined : await (async () => {
    section("9. steering: what a steer message adds to a step")
    return Steering.measure({ quick, log })
  })()
  const replay = args.has("--no-replay") ? undefined : await (async () => {
    section("10. replay, run records and forks")
    return { replay: await Replay.measure({ quick, log }), fork: await Replay.measureFork({ quick, log }) }
  })()
  const profiles: Array<Report.ProfileResult> = []
  if (!args.has("--no-profile")) {
    section("4. profiles (child processes)")
    const runs: Array<readonly [ModelKind, string | undefined]> = [
      ["encoded", undefined],
      ...(builds.other === undefined ? [] : [["encoded", builds.other.label] as const]),
      ["raw", undefined]
    ]
    for (const [model, build] of runs) {
      const profile = runProfile(model, quick ? 2 : 3, build)
      if (profile !== undefined) {
        profiles.push(profile)
        log(`  ${model} ${build ?? ""}: ${profile.steps} steps, ${profile.summary.totalMs.toFixed(0)} ms sampled`)
        for (const row of profile.summary.self.slice(0, 8)) {
          log(`    ${row.percent.toFixed(1).padStart(5)}%  ${row.name}  ${row.location}`)
        }
      }
    }
  }
  builds.cleanup()
  const elapsed = (performance.now() - started) / 1000
  const results: Report.Results = {
    machine: { ...machine, loadEnd: os.loadavg(), elapsedSeconds: elapsed },
    quick,
    sampling: baseSampling,
    middleware: { encoded: middlewareEncoded, raw: middlewareRaw },
    tools: { encoded: toolsEncoded, raw: toolsRaw, other: toolsOther },
    langchain: langchain === undefined ? undefined : { sampling: langchainSampling, results: langchain },
    peers,
    effectAi: {
      installed: builds.installed,
      patchFile: builds.patchFile,
      other: builds.other?.label,
      note: builds.note
    },
    bare,
    micro,
    ablation,
    memory,
    steps,
    flatSteps,
    firstLoad,
    profiles,
    context,
    durable,
    pii,
    scale,
    steering,
    replay
  }
  const markdown = Report.render(results)
  if (!args.has("--no-write")) {
    Report.writeInto(DOC, markdown)
    log(`wrote ${path.relative(ROOT, DOC)} (${elapsed.toFixed(0)} s)`)
  } else {
    log(markdown)
  }
}

/** Section 6 alone: prints its lines and its Markdown, writes nothing. */
const onlyDurable = async () => {
  const machine = Report.describeMachine(ROOT)
  log(`Stepwise benchmark, durable section only — ${machine.cpu}, ${machine.cores} cores, node ${machine.node}`)
  log(`load average at start: ${machine.loadStart.map((l) => l.toFixed(2)).join(" ")}`)
  const { unitsPerRun: _, ...sampling } = baseSampling
  log(Report.durableSection(await Durable.measure({ quick, sampling, log })))
}

/** Section 10 alone: prints its lines and its Markdown, writes nothing. */
const onlyReplay = async () => {
  const machine = Report.describeMachine(ROOT)
  log(`Stepwise benchmark, replay section only — ${machine.cpu}, ${machine.cores} cores, node ${machine.node}`)
  log(`load average at start: ${machine.loadStart.map((l) => l.toFixed(2)).join(" ")}`)
  const replay = await Replay.measure({ quick, log })
  const fork = await Replay.measureFork({ quick, log })
  log(Replay.render(replay, fork))
  log(`load average at end: ${os.loadavg().map((l) => l.toFixed(2)).join(" ")}`)
}

/** The ablation: generate, stream and durable steps with 0 and 10 middleware, each variant side by side. */
const ablate = () =>
  Ablation.measure(ROOT, {
    rounds: quick ? 10 : 30,
    processes: Ablation.processSets(quick),
    modes: ["generate", "stream", "durable"],
    middleware: [0, 10],
    steps: 10
  })

/** `--only-ablation`: the ablation alone (old and new loop side by side), printed, nothing written. */
async function onlyAblation() {
  const machine = Report.describeMachine(ROOT)
  log(`Stepwise benchmark, ablation only — ${machine.cpu}, ${machine.cores} cores, node ${machine.node}`)
  log(`load average at start: ${machine.loadStart.map((l) => l.toFixed(2)).join(" ")}`)
  for (const a of await ablate()) {
    log(`  ${a.variant.name.padEnd(28)} ${a.applicable ? JSON.stringify(a.perStep) : "not applicable"}`)
    log(`  ${"".padEnd(28)} relative ${JSON.stringify(a.relative)}`)
  }
}

if (args.has("--profile-child")) {
  const model = (process.argv.find((a) => a.startsWith("--model="))?.slice(8) ?? "encoded") as ModelKind
  const seconds = Number(process.argv.find((a) => a.startsWith("--seconds="))?.slice(10) ?? "5")
  await profileChild(model, seconds, args.has("--other-build"))
} else if (args.has("--only-durable")) {
  await onlyDurable()
} else if (args.has("--only-replay")) {
  await onlyReplay()
} else if (args.has("--only-ablation")) {
  await onlyAblation()
} else {
  await main()
}
