/**
 * Reads of the fields of `@effect/ai` messages and parts on a pass over a
 * thread that no counter has seen.
 *
 * `Prompt.makeMessage` and `Prompt.makePart` build each object with an object
 * spread (`{ ...params, role, options }`), and V8 (checked on Node 20, V8
 * 11.3) gives every object built that way a hidden class of its own: 10,000
 * messages have 10,000 classes. A property read written `part.id` then misses
 * V8's caches on every object and costs a lookup in the runtime (about 70 ns
 * per field name per object), which made a first count of 10,000 messages
 * take about 7 ms. The same field read with a key that is a value (`part[key]`)
 * goes through V8's generic keyed lookup instead, about 25 ns. On objects
 * that share a hidden class (messages decoded with `Schema`, LangChain's
 * classes) it costs a few nanoseconds more than a written read. The
 * `@effect/ai` patch this package ships (`assets/patches`) builds parts and
 * messages with `Object.assign`, whose objects share hidden classes; an app
 * that has not applied it still gets the keyed reads' speed here.
 *
 * The numbers come from `packages/bench/src/countingOnly.ts` and a loop over
 * 10,000 parts built as `Prompt.makePart` builds them (see the commit that
 * added this module). Only the approximate counter's pass uses it: the other
 * counters cache counts by identity, so they read each object once anyway.
 */

/** `object[key]`, read as a keyed property (see the module's comment for why). */
export const field = <O extends object, K extends keyof O>(object: O, key: K): O[K] => object[key]
