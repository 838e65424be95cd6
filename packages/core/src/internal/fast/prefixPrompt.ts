/**
 * A model call's `Prompt` over the first `length` messages of an array the
 * run may go on growing in place (`RunState.unseen`): its `content` (the
 * system message, if any, then those messages) is built the first time it is
 * read, and never changes afterwards, however the array grows. A model that
 * never reads its prompt (a fake, a cache keyed on something else) costs no
 * copy of the thread; one that does gets the same array it would have got.
 */
import * as Prompt from "@effect/ai/Prompt"

/** `@effect/ai`'s prompt prototype (its `TypeId` and `pipe`): not exported, read off a prompt it made. */
const proto: object = Object.getPrototypeOf(Prompt.empty)

/**
 * The prompt of `system` (if any) and the first `length` of `messages`, its
 * `content` built when first read (then an ordinary data property).
 */
export const make = (
  messages: ReadonlyArray<Prompt.Message>,
  length: number,
  system: Prompt.Message | undefined
): Prompt.Prompt => {
  const prompt = Object.create(proto)
  Object.defineProperty(prompt, "content", {
    enumerable: true,
    configurable: true,
    get() {
      const content = system === undefined ? messages.slice(0, length) : [system].concat(messages.slice(0, length))
      Object.defineProperty(prompt, "content", { value: content, enumerable: true, writable: true, configurable: true })
      return content
    }
  })
  return prompt
}
