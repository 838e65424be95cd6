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
 * Each field has a reader of its own (one keyed read site each), not one
 * reader taking the key: V8 keeps what a read site has seen per site, and a
 * site that reads one field of objects of a few hidden classes is compiled to
 * a direct load, where one site reading every field of every kind of object
 * takes the generic keyed lookup every time. On a first count of 10,000
 * messages of the patched `@effect/ai` this took the approximate counter
 * from about 1.25 to 0.8 ms, and on objects of a class each from about 1.3 to
 * 0.95 ms (`packages/bench/src/context.ts`, "First call against LangChain").
 *
 * The numbers come from `packages/bench/src/countingOnly.ts` and a loop over
 * 10,000 parts built as `Prompt.makePart` builds them (see the commit that
 * added this module). Only the approximate counter's pass uses it: the other
 * counters cache counts by identity, so they read each object once anyway.
 */

// the keys as values, so that each read below is a keyed read (see the module's comment)
const keys = {
  role: "role",
  content: "content",
  type: "type",
  text: "text",
  name: "name",
  params: "params",
  id: "id",
  result: "result"
} as const

/** `object.role`, read as a keyed property (see the module's comment for why). */
export const role = <O extends { readonly role?: unknown }>(object: O): O["role"] => object[keys.role]

/** `object.content`, read as a keyed property. */
export const content = <O extends { readonly content: unknown }>(object: O): O["content"] => object[keys.content]

/** `object.type`, read as a keyed property. */
export const type = <O extends { readonly type: unknown }>(object: O): O["type"] => object[keys.type]

/** `object.text`, read as a keyed property. */
export const text = <O extends { readonly text: unknown }>(object: O): O["text"] => object[keys.text]

/** `object.name`, read as a keyed property. */
export const name = <O extends { readonly name: unknown }>(object: O): O["name"] => object[keys.name]

/** `object.params`, read as a keyed property. */
export const params = <O extends { readonly params: unknown }>(object: O): O["params"] => object[keys.params]

/** `object.id`, read as a keyed property. */
export const id = <O extends { readonly id: unknown }>(object: O): O["id"] => object[keys.id]

/** `object.result`, read as a keyed property. */
export const result = <O extends { readonly result: unknown }>(object: O): O["result"] => object[keys.result]
