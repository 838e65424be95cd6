/**
 * PostgreSQL for tests: the throwaway server of `postgresServer.ts`, and
 * suites that need it, declared with {@link describePostgres}: without the
 * binaries they are skipped with one line saying so, unless
 * `STEPWISE_REQUIRE_POSTGRES` is set (CI sets it), which turns the skip into
 * a failure.
 */
import { describe, it } from "@effect/vitest"
import { binaries, missing } from "./postgresServer.js"

export { PostgresServer, startPostgres } from "./postgresServer.js"

/**
 * `describe` for a suite that needs a PostgreSQL server. Without the binaries
 * the suite is skipped with one line on stderr, or, when
 * `STEPWISE_REQUIRE_POSTGRES` is set, fails with one test saying what is missing.
 */
export const describePostgres = (name: string, body: () => void): void => {
  if (binaries !== undefined) {
    describe(name, body)
  } else if (process.env.STEPWISE_REQUIRE_POSTGRES) {
    describe(name, () => {
      it("has PostgreSQL binaries (STEPWISE_REQUIRE_POSTGRES is set)", () => {
        throw new Error(missing)
      })
    })
  } else {
    process.stderr.write(`Skipped "${name}": ${missing}.\n`)
    describe.skip(name, body)
  }
}
