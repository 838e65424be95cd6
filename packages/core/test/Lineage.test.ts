/**
 * `internal/lineage.ts`: what the records say about two arrays (how many
 * leading elements they share, a memo of a prefix) must never claim more than
 * is true, and must know what a direct derivation recorded.
 */
import { assert, describe, it } from "@effect/vitest"
import { FastCheck } from "effect"
import * as Lineage from "../src/internal/fast/lineage.js"

interface Item {
  readonly id: number
}

/** One way of making an array from one made before (`from` picks it, modulo how many there are). */
type Op =
  | { readonly _tag: "append"; readonly from: number; readonly count: number }
  | { readonly _tag: "replaceLast"; readonly from: number }
  | { readonly _tag: "derive"; readonly from: number; readonly keep: number; readonly count: number }
  | { readonly _tag: "copy"; readonly from: number; readonly keep: number; readonly count: number }

const op: FastCheck.Arbitrary<Op> = FastCheck.oneof(
  FastCheck.record({
    _tag: FastCheck.constant("append" as const),
    from: FastCheck.nat(),
    count: FastCheck.nat({ max: 3 })
  }),
  FastCheck.record({ _tag: FastCheck.constant("replaceLast" as const), from: FastCheck.nat() }),
  FastCheck.record({
    _tag: FastCheck.constant("derive" as const),
    from: FastCheck.nat(),
    keep: FastCheck.nat(),
    count: FastCheck.nat({ max: 3 })
  }),
  FastCheck.record({
    _tag: FastCheck.constant("copy" as const),
    from: FastCheck.nat(),
    keep: FastCheck.nat(),
    count: FastCheck.nat({ max: 3 })
  })
)

/** How many leading elements the two share, by reference: what the records may claim at most. */
const trulyShared = (a: ReadonlyArray<Item>, b: ReadonlyArray<Item>): number => {
  let i = 0
  while (i < a.length && i < b.length && a[i] === b[i]) i++
  return i
}

/**
 * Runs `ops` from a few unrecorded arrays; gives every array made, and for
 * each one made through the records, the array it was made from and how many
 * leading elements it was said to share with it.
 */
const build = (ops: ReadonlyArray<Op>) => {
  let next = 0
  const fresh = (count: number) => Array.from({ length: count }, () => ({ id: next++ }))
  const arrays: Array<ReadonlyArray<Item>> = [fresh(3), fresh(0), fresh(5)]
  const made: Array<
    { readonly array: ReadonlyArray<Item>; readonly base: ReadonlyArray<Item>; readonly shared: number }
  > = []
  for (const o of ops) {
    const base = arrays[o.from % arrays.length]!
    switch (o._tag) {
      case "append": {
        const array = Lineage.append(base, fresh(o.count))
        made.push({ array, base, shared: base.length })
        arrays.push(array)
        break
      }
      case "replaceLast": {
        if (base.length === 0) break
        const array = Lineage.replaceLast(base, fresh(1)[0]!)
        made.push({ array, base, shared: base.length - 1 })
        arrays.push(array)
        break
      }
      case "derive": {
        const keep = o.keep % (base.length + 1)
        const array = Lineage.derive(base.slice(0, keep).concat(fresh(o.count)), base, keep)
        made.push({ array, base, shared: keep })
        arrays.push(array)
        break
      }
      case "copy": {
        // an array with no record (a hook's), sharing elements with one that has
        arrays.push(base.slice(0, o.keep % (base.length + 1)).concat(fresh(o.count)))
        break
      }
    }
  }
  return { arrays, made }
}

describe("Lineage", () => {
  it.prop(
    "sharedPrefix never claims more than two arrays share, and knows at least what a derivation recorded",
    { ops: FastCheck.array(op, { maxLength: 30 }) },
    ({ ops }) => {
      const { arrays, made } = build(ops)
      for (const a of arrays) {
        for (const b of arrays) assert.isAtMost(Lineage.sharedPrefix(a, b), trulyShared(a, b))
      }
      for (const { array, base, shared } of made) assert.isAtLeast(Lineage.sharedPrefix(base, array), shared)
    },
    { fastCheck: { numRuns: 300 } }
  )

  it.prop(
    "an array appended to the last array of a chain of appends is known to extend every array of the chain",
    { counts: FastCheck.array(FastCheck.nat({ max: 3 }), { minLength: 1, maxLength: 10 }) },
    ({ counts }) => {
      let id = 0
      const chain: Array<ReadonlyArray<Item>> = [[{ id: id++ }]]
      for (const count of counts) {
        chain.push(Lineage.append(chain.at(-1)!, Array.from({ length: count }, () => ({ id: id++ }))))
      }
      // the records answer without looking at the elements: a sparse copy of the last array would not compare
      for (const base of chain) assert.strictEqual(Lineage.sharedPrefix(base, chain.at(-1)!), base.length)
    }
  )

  it.prop(
    "a PrefixMemo gives only what was recorded for a prefix of the array asked about",
    {
      ops: FastCheck.array(op, { maxLength: 30 }),
      recorded: FastCheck.array(FastCheck.record({ at: FastCheck.nat(), cut: FastCheck.nat() }), { maxLength: 6 })
    },
    ({ ops, recorded }) => {
      const { arrays } = build(ops)
      const memo = new Lineage.PrefixMemo<{ readonly array: ReadonlyArray<Item>; readonly length: number }>()
      for (const { at, cut } of recorded) {
        const array = arrays[at % arrays.length]!
        const length = cut % (array.length + 1)
        memo.set(array, { array, length }, length)
      }
      for (const array of arrays) {
        const found = memo.get(array)
        if (found === undefined) continue
        assert.strictEqual(found.length, found.value.length)
        assert.isAtMost(found.length, array.length)
        assert.isAtLeast(trulyShared(found.value.array, array), found.length)
      }
    },
    { fastCheck: { numRuns: 300 } }
  )

  it("a memo recorded for an array is found for the arrays appended to it, and for the array itself", () => {
    const memo = new Lineage.PrefixMemo<string>()
    const base = [{ id: 0 }, { id: 1 }]
    const longer = Lineage.append(base, [{ id: 2 }])
    memo.set(longer, "paired")
    assert.deepStrictEqual(memo.get(longer), { length: 3, value: "paired" })
    assert.deepStrictEqual(memo.get(Lineage.append(longer, [{ id: 3 }])), { length: 3, value: "paired" })
    // a second array appended to `base` forks from the line `longer` is on: it shares only `base`
    assert.strictEqual(memo.get(Lineage.append(base, [{ id: 4 }])), undefined)
    memo.set(longer, "base paired", 2)
    assert.deepStrictEqual(memo.get(Lineage.append(base, [{ id: 5 }])), { length: 2, value: "base paired" })
  })
})
