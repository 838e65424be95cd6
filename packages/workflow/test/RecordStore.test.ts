import { assert, describe, layer } from "@effect/vitest"
import * as RecordStore from "@stepwise-agent/workflow/RecordStore"
import { Effect, Layer } from "effect"
import * as Databases from "./support/databases.js"
import { describePostgres } from "./support/postgres.js"

let tables = 0

/** The behaviour every store must have; `make` gives a fresh, empty store per call. */
const conformance = <R>(
  name: string,
  provide: Layer.Layer<R>,
  make: () => Effect.Effect<RecordStore.RecordStore.Service, unknown, R>
) =>
  layer(provide, { timeout: "60 seconds", excludeTestServices: true })(name, (it) => {
    it.effect("keeps a run's header and entries by slot, in slot order, each slot's last line", () =>
      Effect.gen(function*() {
        const store = yield* make()
        assert.deepStrictEqual(yield* store.read("r1"), { header: undefined, entries: [] })
        yield* store.put("r1", 2, "two")
        yield* store.put("r1", 0, "zero")
        yield* store.put("r1", 10, "ten")
        yield* store.put("r1", 1, "one")
        yield* store.put("r1", -1, "header")
        yield* store.put("r2", 0, "other run")
        // a wait's entry is written again with its decision
        yield* store.put("r1", 1, "one, decided")
        assert.deepStrictEqual(yield* store.read("r1"), {
          header: "header",
          entries: [[0, "zero"], [1, "one, decided"], [2, "two"], [10, "ten"]]
        })
        yield* store.delete("r1")
        assert.deepStrictEqual(yield* store.read("r1"), { header: undefined, entries: [] })
        assert.deepStrictEqual((yield* store.read("r2")).entries, [[0, "other run"]])
      }))
  })

describe("RecordStore", () => {
  conformance("in memory", Layer.empty, () => RecordStore.makeMemory)
  conformance("on SQLite", Databases.sqlite, () => RecordStore.make({ table: `records_${tables++}` }))
  describePostgres(
    "the RecordStore on PostgreSQL",
    () => conformance("on PostgreSQL", Databases.postgres, () => RecordStore.make({ table: `records_${tables++}` }))
  )
})
