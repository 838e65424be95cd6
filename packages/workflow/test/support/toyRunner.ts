/**
 * A runner process for the toy workflow, for crash and scale-out tests.
 *
 * Environment: `ENGINE` (`sqlite` | `postgres`), `DATABASE` (a file — the default when unset — or a url),
 * `DIRECTORY` (where attempts and effects are logged), `RUNNER` (a name),
 * `RUNNER_PORT` (postgres: the runner address port), `STEP_DELAY_MS`,
 * `TAKEOVER_MS` (postgres), `LEASE_MS` and `HEARTBEAT_MS` (sqlite: the runner lease's length and renewal
 * interval, default 10 s and 2 s). Prints `ready <pid>` once the engine is up, or
 * `failed <tag> <message>` if the engine layer fails, then keeps running.
 */
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import * as AgentEngine from "../../src/AgentEngine.js"
import { LeaseTiming } from "../../src/internal/leaseTiming.js"
import { toyLayer } from "./toyWorkflow.js"

const env = (name: string) => {
  const value = process.env[name]
  if (value === undefined) throw new Error(`missing ${name}`)
  return value
}

const leaseTiming = process.env.LEASE_MS === undefined ? Layer.empty : Layer.succeed(LeaseTiming, {
  leaseFor: Duration.millis(Number(process.env.LEASE_MS)),
  heartbeatEvery: Duration.millis(Number(env("HEARTBEAT_MS")))
})

const engine = env("ENGINE") === "sqlite"
  ? AgentEngine.layerSqlite({ filename: process.env.DATABASE }).pipe(Layer.provide(leaseTiming))
  : AgentEngine.layerPostgres({
    url: Redacted.make(env("DATABASE")),
    runnerAddress: Option.some({ host: "127.0.0.1", port: Number(env("RUNNER_PORT")) }),
    takeoverAfter: `${Number(process.env.TAKEOVER_MS ?? 10_000)} millis`
  })

const main = Effect.sync(() => process.stdout.write(`ready ${process.pid}\n`)).pipe(
  Effect.zipRight(Effect.never),
  Effect.provide(
    toyLayer({
      directory: env("DIRECTORY"),
      runner: env("RUNNER"),
      stepDelay: `${Number(process.env.STEP_DELAY_MS ?? 10)} millis`
    }).pipe(Layer.provideMerge(engine))
  ),
  Effect.catchAll((error) =>
    Effect.sync(() => process.stdout.write(`failed ${error._tag} ${error.message}\n`)).pipe(
      Effect.zipRight(Effect.never)
    )
  )
)

NodeRuntime.runMain(main, { disablePrettyLogger: true })
