/**
 * A toy workflow for engine tests: two activities, each applying a side
 * effect outside the process under an idempotency key.
 *
 * Every attempt is logged to `attempts.log` (`start` when it begins, then
 * `applied` or `skipped`); the effect itself is a file `effects/<key>` created
 * exclusively, so a repeated attempt (at-least-once after a crash) finds it and
 * does not apply it again. Counting `applied` lines tells how many effects
 * really happened; counting `start` lines tells how often activities ran.
 */
import * as Activity from "@effect/workflow/Activity"
import * as Workflow from "@effect/workflow/Workflow"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import * as fs from "node:fs"
import * as path from "node:path"

export const Toy = Workflow.make({
  name: "Toy",
  payload: { runId: Schema.String },
  success: Schema.String,
  idempotencyKey: ({ runId }) => runId
})

export interface Attempt {
  readonly event: "start" | "applied" | "skipped"
  readonly key: string
  readonly runner: string
  readonly at: number
}

const log = (directory: string, attempt: Omit<Attempt, "at">) =>
  fs.appendFileSync(path.join(directory, "attempts.log"), JSON.stringify({ ...attempt, at: Date.now() }) + "\n")

/** Applies the effect `key` once: the first attempt creates `effects/<key>`, later ones find it. */
const applyOnce = (directory: string, key: string, runner: string): "applied" | "skipped" => {
  fs.mkdirSync(path.join(directory, "effects"), { recursive: true })
  // write aside, then link into place: the effect appears whole or not at all, even under SIGKILL
  const draft = path.join(directory, `draft-${process.pid}-${encodeURIComponent(key)}`)
  fs.writeFileSync(draft, runner)
  try {
    fs.linkSync(draft, path.join(directory, "effects", encodeURIComponent(key)))
    return "applied"
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "EEXIST") return "skipped"
    throw error
  } finally {
    fs.rmSync(draft)
  }
}

const step = (
  directory: string,
  runner: string,
  delay: Duration.DurationInput,
  hold: (key: string) => Effect.Effect<void>,
  runId: string,
  name: string
) =>
  Activity.make({
    name,
    success: Schema.String,
    execute: Effect.gen(function*() {
      const key = `${runId}/${name}`
      log(directory, { event: "start", key, runner })
      yield* hold(key)
      yield* Effect.sleep(delay)
      log(directory, { event: applyOnce(directory, key, runner), key, runner })
      return key
    })
  })

/**
 * The workflow body, run by `runner`, logging into `directory`. Each step runs `hold` with its key once it has
 * logged its start (a point where a test acts while the step is in flight), then takes `stepDelay`.
 */
export const toyLayer = (options: {
  readonly directory: string
  readonly runner: string
  readonly stepDelay?: Duration.DurationInput | undefined
  readonly hold?: ((key: string) => Effect.Effect<void>) | undefined
}) =>
  Toy.toLayer(Effect.fnUntraced(function*({ runId }) {
    const delay = options.stepDelay ?? Duration.millis(10)
    const hold = options.hold ?? (() => Effect.void)
    const first = yield* step(options.directory, options.runner, delay, hold, runId, "first")
    const second = yield* step(options.directory, options.runner, delay, hold, runId, "second")
    return `${first}+${second}`
  }))

/** Reads `attempts.log` (empty when missing). */
export const readAttempts = (directory: string): ReadonlyArray<Attempt> => {
  const file = path.join(directory, "attempts.log")
  if (!fs.existsSync(file)) return []
  return fs.readFileSync(file, "utf8").split("\n").filter((line) => line.length > 0).map((line) => JSON.parse(line))
}

/** Reads the effects applied so far: key → the runner that applied it. */
export const readEffects = (directory: string): ReadonlyMap<string, string> => {
  const folder = path.join(directory, "effects")
  if (!fs.existsSync(folder)) return new Map()
  return new Map(
    fs.readdirSync(folder).map((name) => [decodeURIComponent(name), fs.readFileSync(path.join(folder, name), "utf8")])
  )
}
