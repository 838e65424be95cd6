/**
 * How long the runner lease of a SQLite run database lasts without a
 * renewal, and how often its runner renews it. Fixed for users (10 s and
 * 2 s); tests provide shorter ones so that a lease lost or expired is seen
 * in a fraction of a second.
 */
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"

/** The lease's length and its renewal interval, read when `layerSqlite` is built. */
export class LeaseTiming extends Context.Reference<LeaseTiming>()("@stepwise-agent/workflow/internal/leaseTiming", {
  defaultValue: (): { readonly leaseFor: Duration.Duration; readonly heartbeatEvery: Duration.Duration } => ({
    leaseFor: Duration.seconds(10),
    heartbeatEvery: Duration.seconds(2)
  })
}) {}
