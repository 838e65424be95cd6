/**
 * Views of the first `length` messages of an array the run may go on growing
 * in place (`RunState.unseen`), for what a model call gives out: the prompt
 * the model gets, and the state a `ModelRequestSent` event reports. Their
 * messages array is built the first time it is read, and never changes
 * afterwards, however the run's array grows. A model that never reads its
 * prompt (a fake, a cache keyed on something else) and a watcher that never
 * reads the state cost no copy of the thread; one that does gets the array
 * it would have got.
 */
import * as Prompt from "@effect/ai/Prompt"

/** `@effect/ai`'s prompt prototype (its `TypeId` and `pipe`): not exported, read off a prompt it made. */
const promptProto: object = Object.getPrototypeOf(Prompt.empty)

/** What a lazy property is built from, and the value it built (kept here: a frozen target cannot take it). */
interface Pending {
  readonly messages: ReadonlyArray<Prompt.Message>
  readonly length: number
  readonly system: Prompt.Message | undefined
  built: boolean
  value: unknown
}

/** Where a view keeps its {@link Pending} (not enumerable: spread, JSON and keys never see it). */
const pendingKey = Symbol.for("@stepwise-agent/core/prefixViews/pending")

/** The messages a view stands for: the system message, if any, then the first `length`. */
const build = ({ length, messages, system }: Pending): ReadonlyArray<Prompt.Message> =>
  system === undefined ? messages.slice(0, length) : [system].concat(messages.slice(0, length))

/** `target`'s property `key` a data property holding `value`, when `target` still lets it be redefined. */
const settle = (target: object, key: string, value: unknown): boolean =>
  Reflect.defineProperty(target, key, { value, enumerable: true, writable: true, configurable: true })

/**
 * The accessor of a lazy property `key`, one for every view (so that views
 * share their hidden class): built from the view's {@link Pending} when first
 * read (then an ordinary data property). A property set before it is read
 * takes the value set, unbuilt; on an object frozen or sealed before the
 * property was read, it stays an accessor that gives the one value it built,
 * and refuses to be set, as a frozen data property would.
 */
const lazyProperty = (key: string): PropertyDescriptor => ({
  enumerable: true,
  configurable: true,
  get(this: { readonly [pendingKey]: Pending }) {
    const pending = this[pendingKey]
    if (!pending.built) {
      pending.value = build(pending)
      pending.built = true
      settle(this, key, pending.value)
    }
    return pending.value
  },
  set(this: object, given: unknown) {
    if (!settle(this, key, given)) throw new TypeError(`Cannot assign to read only property '${key}' of object`)
  }
})

const lazyContent = lazyProperty("content")
const lazyMessages = lazyProperty("messages")

/** `target` with its lazy property `key` (`descriptor`), standing for the first `length` of `messages`. */
const lazily = <T extends object>(
  target: T,
  descriptor: PropertyDescriptor,
  key: string,
  pending: Pending
): T => {
  Object.defineProperty(target, pendingKey, { value: pending })
  return Object.defineProperty(target, key, descriptor)
}

/** The prompt of `system` (if any) and the first `length` of `messages`, its `content` built when first read. */
export const prompt = (
  messages: ReadonlyArray<Prompt.Message>,
  length: number,
  system: Prompt.Message | undefined
): Prompt.Prompt =>
  lazily(Object.create(promptProto), lazyContent, "content", {
    messages,
    length,
    system,
    built: false,
    value: undefined
  })

/** `state` (a flattened state, see `AgentState.Layout`) with the first `length` of `messages` as its `messages`, built when first read. */
export const state = <S extends object>(state: S, messages: ReadonlyArray<Prompt.Message>, length: number): S =>
  lazily({ ...state }, lazyMessages, "messages", {
    messages,
    length,
    system: undefined,
    built: false,
    value: undefined
  })
