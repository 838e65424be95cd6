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

/**
 * Gives `target` the enumerable property `key`, built by `build` when first
 * read (then an ordinary data property), and gives `target`. A property that
 * is set before it is read takes the value set, unbuilt; on an object frozen
 * or sealed before the property was read, it stays an accessor that gives
 * the one value it built, and refuses to be set, as a frozen data property
 * would.
 */
const lazily = <T extends object>(target: T, key: string, build: () => unknown): T => {
  let built = false
  let value: unknown
  /** The property a data property holding `given`, when `target` still lets it be redefined. */
  const settle = (given: unknown): boolean =>
    Reflect.defineProperty(target, key, { value: given, enumerable: true, writable: true, configurable: true })
  return Object.defineProperty(target, key, {
    enumerable: true,
    configurable: true,
    get() {
      if (!built) {
        value = build()
        built = true
        settle(value)
      }
      return value
    },
    set(given: unknown) {
      if (!settle(given)) throw new TypeError(`Cannot assign to read only property '${key}' of object`)
    }
  })
}

/** The prompt of `system` (if any) and the first `length` of `messages`, its `content` built when first read. */
export const prompt = (
  messages: ReadonlyArray<Prompt.Message>,
  length: number,
  system: Prompt.Message | undefined
): Prompt.Prompt =>
  lazily(
    Object.create(promptProto),
    "content",
    () => system === undefined ? messages.slice(0, length) : [system].concat(messages.slice(0, length))
  )

/** `state` (a flattened state, see `AgentState.Layout`) with the first `length` of `messages` as its `messages`, built when first read. */
export const state = <S extends object>(state: S, messages: ReadonlyArray<Prompt.Message>, length: number): S =>
  lazily({ ...state }, "messages", () => messages.slice(0, length))
