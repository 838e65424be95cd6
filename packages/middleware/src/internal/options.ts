/**
 * Option checking shared by every built-in: a Schema of the options decodes
 * what the caller gave (unknown keys are an error) and the first problem
 * becomes an `InvalidOptions` naming the option's path.
 */
import type * as LanguageModel from "@effect/ai/LanguageModel"
import * as AgentError from "@stepwise-agent/core/AgentError"
import * as Middleware from "@stepwise-agent/core/Middleware"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import * as ParseResult from "effect/ParseResult"
import * as Predicate from "effect/Predicate"
import * as Schedule from "effect/Schedule"
import * as Schema from "effect/Schema"

/** An option's value as an error shows it (`Secrets.describeValue`). */
export { describeValue } from "@stepwise-agent/core/Secrets"

/** An `InvalidOptions` of `module`. */
export const invalid = (module: string, option: string, reason: string): AgentError.InvalidOptions =>
  new AgentError.InvalidOptions({ module, option, reason })

const pathOf = (path: ReadonlyArray<PropertyKey>): string =>
  path.reduce<string>(
    (out, key) =>
      typeof key === "number"
        ? `${out}[${key}]`
        : typeof key === "string" && !/^[^.[\]\s]+$/.test(key)
        ? `${out}[${JSON.stringify(key)}]`
        : out === ""
        ? String(key)
        : `${out}.${String(key)}`,
    ""
  )

const actualPattern = /^Expected (.*), actual (.*)$/s

/**
 * The issue to report: the deepest one (a union reports a failure at each of
 * its members; the deepest names the option most precisely). Failures of the
 * members of a union at the same place are merged into one "Expected A | B".
 */
const describe = (error: ParseResult.ParseError): { readonly option: string; readonly reason: string } => {
  const issues = ParseResult.ArrayFormatter.formatErrorSync(error)
  const depth = Math.max(...issues.map((issue) => issue.path.length))
  const atDepth = issues.filter((issue) => issue.path.length === depth)
  // an optional option also fails as "Expected undefined": say what it should have been
  const defined = atDepth.filter((issue) => !issue.message.startsWith("Expected undefined,"))
  // a wrong value says more than a union member's missing or unknown key
  const typed = defined.filter((issue) => issue._tag !== "Missing" && issue._tag !== "Unexpected")
  const deepest = typed.length > 0 ? typed : defined.length > 0 ? defined : atDepth
  const first = deepest[0]!
  if (depth === 0) return { option: "options", reason: "must be an object" }
  const option = pathOf(first.path)
  if (first._tag === "Unexpected") {
    // each member of a union says which keys it expects: list them all
    const expected = deepest
      .filter((issue) => issue._tag === "Unexpected" && pathOf(issue.path) === option)
      .map((issue) => issue.message.replace(/^is unexpected, expected: /, ""))
    return { option, reason: `is unknown; expected ${[...new Set(expected)].join(" | ")}` }
  }
  const matches = deepest.map((issue) => actualPattern.exec(issue.message))
  if (deepest.length > 1 && matches.every((match) => match !== null && match[2] === matches[0]![2])) {
    return { option, reason: `Expected ${matches.map((match) => match![1]).join(" | ")}, actual ${matches[0]![2]}` }
  }
  return { option, reason: first.message }
}

/**
 * Checks `options` against `schema`: an unknown key, a missing or mistyped
 * value fail with `InvalidOptions` naming its path. `undefined` stands for
 * `{}` (every built-in's options are optional or an object).
 */
export const validateEither = <A, I>(
  module: string,
  schema: Schema.Schema<A, I, never>,
  options: unknown
): Either.Either<A, AgentError.InvalidOptions> => {
  const given = options === undefined ? {} : options
  let decoded: Either.Either<A, ParseResult.ParseError>
  try {
    decoded = decode(schema)(given)
  } catch {
    // a union told apart by a literal field makes that field's value a string to look it up, which throws for a
    // symbol or an object without a prototype: such a value is of no kind an option takes
    return Either.left(
      invalid(
        module,
        unreadableAt(given, []) ?? "options",
        "holds a value no option takes (a symbol, or an object that cannot be read as a text)"
      )
    )
  }
  return Either.mapLeft(decoded, (error) => {
    const { option, reason } = describe(error)
    return invalid(module, option, reason)
  })
}

/** The path of the first value in `value` (a few levels deep) that `String` cannot convert, if any. */
const unreadableAt = (value: unknown, path: ReadonlyArray<PropertyKey>): string | undefined => {
  if (typeof value === "symbol") return pathOf(path)
  if (typeof value !== "object" || value === null) return undefined
  try {
    String(value)
  } catch {
    if (path.length > 0) return pathOf(path)
  }
  if (path.length >= 4) return undefined
  for (const key of Object.keys(value).slice(0, 100)) {
    const found = unreadableAt((value as Record<string, unknown>)[key], [
      ...path,
      Array.isArray(value) ? Number(key) : key
    ])
    if (found !== undefined) return found
  }
  return undefined
}

/** {@link validateEither} as an `Effect`. */
export const validate = <A, I>(
  module: string,
  schema: Schema.Schema<A, I, never>,
  options: unknown
): Effect.Effect<A, AgentError.InvalidOptions> => Effect.suspend(() => validateEither(module, schema, options))

/**
 * Checks `options` like {@link validate} and builds the middleware from
 * them, or gives one whose setup fails with the `InvalidOptions` (so
 * `Agent.make` fails with it).
 */
export const middlewareOf = <A, I, M extends Middleware.Any>(
  module: string,
  schema: Schema.Schema<A, I, never>,
  options: unknown,
  build: (options: A) => M
): M => Either.match(validateEither(module, schema, options), { onLeft: failing<M>, onRight: build })

/** A middleware (named after the module) whose setup fails with `error`: `Agent.make` fails with it. */
export const failing = <M extends Middleware.Any>(error: AgentError.InvalidOptions): M =>
  Middleware.unwrap(Effect.fail(error), { name: error.module }) as Middleware.Any as M

/**
 * The name a built-in given `options` will have: its `name` option when that
 * is a non-empty text, else `fallback`. For `Middleware.unwrap`, so that the
 * middleware has its name before `Agent.make` builds it.
 */
export const nameOf = (options: unknown, fallback: string): string =>
  Predicate.hasProperty(options, "name") && typeof options.name === "string" && options.name.length > 0
    ? options.name
    : fallback

const decode = <A, I>(schema: Schema.Schema<A, I, never>) =>
  Schema.decodeUnknownEither(schema, { onExcessProperty: "error", errors: "all" })

// -----------------------------------------------------------------------------
// schemas of values checked by kind, not content
// -----------------------------------------------------------------------------

/** A function (its arguments and result are not checked). */
export const AnyFunction = Schema.declare(
  (u: unknown): u is (...args: ReadonlyArray<any>) => unknown => typeof u === "function",
  { identifier: "a function" }
)

/** A `Duration.DurationInput`. */
export const DurationInput = Schema.declare(
  (u: unknown): u is Duration.DurationInput => Option.isSome(Duration.decodeUnknown(u)),
  { identifier: "a duration (a Duration, a number of milliseconds or a text such as \"5 seconds\")" }
)

/** A `LanguageModel` service. */
export const LanguageModelService = Schema.declare(
  (u: unknown): u is LanguageModel.Service =>
    Predicate.hasProperty(u, "generateText") && typeof u.generateText === "function" &&
    Predicate.hasProperty(u, "generateObject") && typeof u.generateObject === "function",
  { identifier: "a LanguageModel service" }
)

/** A Schema. */
export const AnySchema = Schema.declare(
  (u: unknown): u is Schema.Schema.Any => Schema.isSchema(u),
  { identifier: "a Schema" }
)

/** A `Schedule`. */
export const ScheduleSchema = Schema.declare(
  (u: unknown): u is Schedule.Schedule<unknown, any> => Schedule.isSchedule(u),
  { identifier: "a Schedule" }
)

/** A whole number of at least 0. */
export const Count = Schema.Number.pipe(
  Schema.filter((n) => Number.isInteger(n) && n >= 0, { description: "a whole number of at least 0" })
)

/** A whole number of at least 1. */
export const AtLeastOne = Schema.Number.pipe(
  Schema.filter((n) => Number.isInteger(n) && n >= 1, { description: "a whole number of at least 1" })
)

/** A non-empty text. */
export const NonEmpty = Schema.String.pipe(
  Schema.filter((text) => text.length > 0, { description: "a non-empty text" })
)

/** A text that is not blank. */
export const NonBlank = Schema.String.pipe(
  Schema.filter((text) => text.trim().length > 0, { description: "a non-blank text" })
)
