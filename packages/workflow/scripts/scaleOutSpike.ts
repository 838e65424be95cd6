import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import * as AgentEngine from "../src/AgentEngine.js"
import { spawnChild } from "../test/support/child.js"
import { startPostgres } from "../test/support/postgres.js"
import { readAttempts, Toy } from "../test/support/toyWorkflow.js"

const RUNS = Number(process.env.RUNS ?? 20)
const TAKEOVER = Number(process.env.TAKEOVER_MS ?? 10000)
const DELAY = Number(process.env.STEP_DELAY_MS ?? 300)
const t0 = Date.now()
const log = (...a: Array<unknown>) => console.log(`[${((Date.now() - t0) / 1000).toFixed(2)}s]`, ...a)

const pg = await startPostgres()
log("pg up", pg.port)
const url = await pg.createDatabase("wf")
const directory = fs.mkdtempSync(path.join(os.tmpdir(), "scaleout-"))
const runner = (name: string, port: number) =>
  spawnChild(path.join(import.meta.dirname, "../test/support/toyRunner.ts"), {
    ENGINE: "postgres",
    DATABASE: pg.urlOf("wf"),
    DIRECTORY: directory,
    RUNNER: name,
    RUNNER_PORT: String(port),
    STEP_DELAY_MS: String(DELAY),
    TAKEOVER_MS: String(TAKEOVER)
  })
const a = runner("A", 1)
const b = runner("B", 2)
try {
  await a.waitForLine((l) => l.startsWith("ready") || l.startsWith("failed"), 60000).then((l) => log("A:", l))
  await b.waitForLine((l) => l.startsWith("ready") || l.startsWith("failed"), 60000).then((l) => log("B:", l))
  // let both register and split shards
  await new Promise((r) => setTimeout(r, 3000))
  log("starting runs")
  const program = Effect.gen(function*() {
    const ids: Array<string> = []
    for (let i = 0; i < RUNS; i++) ids.push(yield* Toy.execute({ runId: `run-${i}` }, { discard: true }))
    log("started all")
    let killedAt = 0
    const deadline = Date.now() + 120_000
    let lastDone = -1
    while (Date.now() < deadline) {
      const attempts = readAttempts(directory)
      const applied = attempts.filter((x) => x.event === "applied")
      if (killedAt === 0 && applied.filter((x) => x.runner === "A").length >= 3) {
        log("killing A; applied so far", applied.length, "starts", attempts.filter((x) => x.event === "start").length)
        yield* Effect.promise(() => a.kill())
        killedAt = Date.now()
        log("A dead")
      }
      let done = 0
      for (const id of ids) {
        const r = yield* Toy.poll(id)
        if (r?._tag === "Complete") done++
      }
      if (done !== lastDone) {
        log("complete", done)
        lastDone = done
      }
      if (done === ids.length) break
      yield* Effect.sleep("200 millis")
    }
    const attempts = readAttempts(directory)
    const byKey = new Map<string, Array<string>>()
    for (const x of attempts) {
      byKey.set(x.key, [...(byKey.get(x.key) ?? []), `${x.runner}:${x.event}@${((x.at - t0) / 1000).toFixed(2)}`])
    }
    const applied = attempts.filter((x) => x.event === "applied")
    log(
      "applied",
      applied.length,
      "distinct",
      new Set(applied.map((x) => x.key)).size,
      "starts",
      attempts.filter((x) => x.event === "start").length,
      "skipped",
      attempts.filter((x) => x.event === "skipped").length
    )
    log(
      "A starts",
      attempts.filter((x) => x.event === "start" && x.runner === "A").length,
      "B starts",
      attempts.filter((x) => x.event === "start" && x.runner === "B").length
    )
    for (const [k, v] of byKey) if (v.length > 2) log("retried", k, v.join(" "))
    const afterKill = attempts.filter((x) => x.at > killedAt && x.runner === "B")
    log(
      "first B attempt after kill at +",
      ((Math.min(...afterKill.filter((x) => byKey.get(x.key)!.some((s) => s.startsWith("A:"))).map((x) => x.at)) -
        killedAt) / 1000).toFixed(2),
      "s"
    )
    const results = []
    for (const id of ids) {
      const r = yield* Toy.poll(id)
      results.push(r?._tag === "Complete" ? r.exit._tag : "pending")
    }
    log(results.join(","))
  })
  await Effect.runPromise(
    program.pipe(Effect.provide(AgentEngine.layerPostgres({ url, runnerAddress: Option.none() })), Effect.scoped)
  )
} finally {
  await a.kill().catch(() => {})
  await b.kill().catch(() => {})
  log("B stderr tail", b.stderr().slice(-2000))
  log("B stdout tail", b.lines.slice(-20).join("\n"))
  await pg.stop()
  log("stopped")
}
