import { assert, describe, it } from "@effect/vitest"
import * as Secrets from "@stepwise-agent/core/Secrets"
import { SpanRecorder } from "@stepwise-agent/testing"
import { Cause, Effect, FastCheck, Logger, Redacted, Schema } from "effect"
import { inspect } from "node:util"

const key = "Zx9qWv3LmN7pRt2YbK5s"

class Failed extends Schema.TaggedError<Failed>()("Failed", { reason: Schema.String }) {}

/**
 * Objects that hold `text` where no own field shows it: their class's
 * `toJSON`, `toString`, `Symbol.toPrimitive` or custom inspect writes it
 * (from a closure or a private field), a `message` getter computes it, a
 * `cause` chain or an Effect `Cause` carries such an object.
 */
const holders = {
  "toJSON of its class (a closure)": (text: string) => {
    class Holder {
      toJSON() {
        return { detail: text }
      }
    }
    return new Holder()
  },
  "toJSON of its class (a private field)": (text: string) => {
    class Holder extends Error {
      readonly #detail = text
      toJSON() {
        return { detail: this.#detail }
      }
    }
    return new Holder("request failed")
  },
  "own toJSON answering the text": (text: string) => ({ toJSON: () => text }),
  "nested toJSON": (text: string) => ({ toJSON: () => ({ inner: { toJSON: () => ({ text }) } }) }),
  "toString of its class": (text: string) => {
    class Holder extends Error {
      override toString() {
        return `Holder: ${text}`
      }
    }
    return new Holder("request failed")
  },
  "Symbol.toPrimitive": (text: string) => ({ [Symbol.toPrimitive]: () => `primitive ${text}` }),
  "custom inspect": (text: string) => ({ [inspect.custom]: () => `inspected ${text}` }),
  "a message getter that computes": (text: string) => {
    class Holder extends Error {
      override get message() {
        return `computed ${text}`
      }
    }
    return new Holder()
  },
  "an own getter": (text: string) => Object.defineProperty({}, "detail", { get: () => text, enumerable: true }),
  "a cause chain": (text: string) =>
    new Error("outer", { cause: new Error("middle", { cause: { toJSON: () => ({ upstream: text }) } }) }),
  "an Effect Cause in a field": (text: string) => ({
    failure: Cause.sequential(Cause.fail({ toJSON: () => text }), Cause.die(new Error(text)))
  }),
  "a TaggedError whose toJSON adds the text": (text: string) => {
    class Holder extends Failed {
      override toJSON() {
        return { ...super.toJSON() as object, upstream: text }
      }
    }
    return new Holder({ reason: "quota" })
  },
  "a Redacted value beside it": (text: string) => ({ secret: Redacted.make(text), toJSON: () => ({ echo: text }) })
} as const
type Holder = keyof typeof holders

/** What the sinks write: a log line, an event's message, a stored failure, a span's failure, JSON, inspect. */
const sinks = (value: unknown): Array<string> => {
  const scrubbed = Secrets.scrubError(value)
  const cause = Secrets.scrubCause(Cause.fail(value))
  return [
    Secrets.messageOf(value),
    JSON.stringify(scrubbed) ?? "",
    JSON.stringify({ nested: [scrubbed] }),
    String(scrubbed),
    `${scrubbed}`,
    inspect(scrubbed, { depth: 8 }),
    Cause.pretty(cause),
    Cause.pretty(Secrets.scrubCause(Cause.die(value))),
    JSON.stringify(cause)
  ]
}

describe("Secrets: what a sink writes of a scrubbed value", () => {
  it.scoped("an object that writes a registered key through its own ways (toJSON, toString, getters, …) writes none", () =>
    Effect.gen(function*() {
      yield* Secrets.register(key)
      for (const [name, make] of Object.entries(holders)) {
        for (const output of sinks(make(key))) assert.notInclude(output, key, name)
      }
    }))

  it("a key the error shows it sent (a request's Bearer header) is hidden from what its toJSON writes too", () => {
    const token = "tok_0123456789abcdefghij"
    class Upstream extends Error {
      readonly request = {
        method: "POST",
        url: "https://api.example.com/v1/chat/completions",
        headers: { authorization: `Bearer ${token}` }
      }
      toJSON() {
        return { said: `rejected ${token}` }
      }
    }
    for (const output of sinks(new Upstream("401"))) assert.notInclude(output, token)
  })

  it.effect.prop(
    "a registered key, maybe encoded, written by any of an object's own ways, comes out of no sink",
    {
      holder: FastCheck.constantFrom(...Object.keys(holders) as Array<Holder>),
      encode: FastCheck.constantFrom(
        (text: string) => text,
        (text: string) => encodeURIComponent(encodeURIComponent(encodeURIComponent(text))),
        (text: string) => Buffer.from(encodeURIComponent(text)).toString("base64"),
        (text: string) => JSON.stringify(`key=${text}`)
      ),
      around: FastCheck.constantFrom((text: string) => text, (text: string) => `upstream said ${text}!`)
    },
    ({ around, encode, holder }) =>
      Effect.gen(function*() {
        yield* Secrets.register(key)
        const written = encode(key)
        for (const output of sinks(holders[holder](around(written)))) {
          assert.notInclude(output, key, holder)
          assert.notInclude(output, written, holder)
        }
      }).pipe(Effect.scoped),
    { fastCheck: { numRuns: 100 }, timeout: 120_000 }
  )

  it.scoped("a log line of a scrubbed cause and a span's failure hold no key", () =>
    Effect.gen(function*() {
      yield* Secrets.register(key)
      const lines: Array<string> = []
      const capture = (logger: Logger.Logger<unknown, string>) => Logger.map(logger, (line) => void lines.push(line))
      const failure = holders["toJSON of its class (a private field)"](key)
      yield* Effect.logError("failed", Secrets.scrubCause(Cause.fail(failure))).pipe(
        Effect.provide(Logger.replace(Logger.defaultLogger, capture(Logger.logfmtLogger))),
        Effect.andThen(Effect.logError(Secrets.scrubError(failure))),
        Effect.provide(Logger.replace(Logger.defaultLogger, capture(Logger.jsonLogger)))
      )
      yield* Effect.logError(Secrets.scrubError(holders["own toJSON answering the text"](key))).pipe(
        Effect.provide(
          Logger.replace(Logger.defaultLogger, capture(Logger.structuredLogger.pipe(Logger.map(JSON.stringify))))
        )
      )
      assert.isAtLeast(lines.length, 2)
      for (const line of lines) assert.notInclude(line, key)

      const { spans, tracer } = SpanRecorder.make()
      yield* Effect.fail(failure).pipe(
        Effect.withSpan("call", { attributes: { upstream: holders["custom inspect"](key) } }),
        Effect.withTracer(Secrets.scrubTracer(tracer)),
        Effect.ignore
      )
      assert.strictEqual(spans[0]!.status._tag, "Ended")
      const status = spans[0]!.status
      for (const value of [status._tag === "Ended" ? status.exit : undefined, ...spans[0]!.attributes.values()]) {
        for (const written of [JSON.stringify(value), inspect(value, { depth: 8 }), String(value)]) {
          assert.notInclude(written, key)
        }
      }
    }))

  it("an object with nothing to scrub, its own toJSON included, is returned as it is", () => {
    const quiet = { toJSON: () => ({ status: 503 }) }
    class Plain extends Error {
      toJSON() {
        return { status: 503 }
      }
    }
    const error = new Plain("overloaded")
    assert.strictEqual(Secrets.scrubError(quiet), quiet)
    assert.strictEqual(Secrets.scrubError(error), error)
    assert.strictEqual(Secrets.scrubError(new Failed({ reason: "quota" })).reason, "quota")
  })

  it("a toJSON that answers a new object with a toJSON, on and on, ends", () => {
    class Endless {
      toJSON(): unknown {
        return new Endless()
      }
    }
    const scrubbed = Secrets.scrubError({ inner: new Endless() })
    assert.strictEqual(JSON.stringify(scrubbed), "{\"inner\":{}}")
  })
})
