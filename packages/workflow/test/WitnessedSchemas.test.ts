/**
 * `withWitnessed` makes one journaled schema per result schema (so the
 * activities of one kind of step share their exit schema): the schema it
 * gives is always the one of the result schema asked for.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Schema } from "effect"
import { withWitnessed } from "../src/internal/durableJournal.js"

describe("withWitnessed", () => {
  it.effect("gives the same schema for one result schema, and each result schema its own", () =>
    Effect.gen(function*() {
      const Count = Schema.Struct({ count: Schema.Number })
      const Name = Schema.Struct({ name: Schema.String })
      assert.strictEqual(withWitnessed(Count), withWitnessed(Count))
      assert.notStrictEqual<unknown>(withWitnessed(Count), withWitnessed(Name))
      // a schema made again from the same fields is another schema: it is not served the first one's
      const CountAgain = Schema.Struct({ count: Schema.NumberFromString })
      assert.deepStrictEqual(yield* Schema.decodeUnknown(withWitnessed(CountAgain))({ count: "3" }), [{ count: 3 }, []])
      assert.deepStrictEqual(yield* Schema.decodeUnknown(withWitnessed(Count))({ count: 3 }), [{ count: 3 }, []])
      assert.deepStrictEqual(yield* Schema.decodeUnknown(withWitnessed(Name))({ name: "a" }), [{ name: "a" }, []])
      assert.deepStrictEqual(yield* Schema.encode(withWitnessed(CountAgain))([{ count: 3 }, []]), { count: "3" })
    }))
})
