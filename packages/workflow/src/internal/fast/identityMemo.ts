/**
 * A function of an object remembered per object (by identity, in a
 * `WeakMap`, so it keeps nothing alive): for what is built from a value that
 * never changes (the journaled schema of a step kind) and is asked for
 * at every activity. The fallback is `build` itself.
 */
export const identityMemo = <K extends object, V>(build: (key: K) => V): (key: K) => V => {
  const memo = new WeakMap<K, V>()
  return (key) => {
    let value = memo.get(key)
    if (value === undefined) {
      value = build(key)
      memo.set(key, value)
    }
    return value
  }
}
