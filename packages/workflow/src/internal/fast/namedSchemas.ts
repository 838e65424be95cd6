/**
 * The schemas an activity is made with, named. `Activity.make` (@effect/workflow
 * 0.19) builds an exit schema at every call and titles it with the text of its
 * success and error schemas (`Exit<…, …>`), writing out a step's whole result
 * schema each time; a schema with an identifier is written as its name. One
 * named copy per schema (`identityMemo.ts`), so the activities of one kind of
 * step still share their exit schema (`withSharedExitSchema`).
 */
import type * as Schema from "effect/Schema"
import { identityMemo } from "./identityMemo.js"

/** The named copy of each schema, one per schema, for `identifier`. */
const namedAs = (identifier: string) =>
  identityMemo((schema: Schema.Schema.Any): Schema.Schema.Any => schema.annotations({ identifier }))
const stepResults = namedAs("StepResult")
const runFailures = namedAs("RunFailure")

/** `schema` (a step's result schema) named `StepResult`: the same decoding and encoding. */
export const stepResult = <S extends Schema.Schema.Any>(schema: S): S => stepResults(schema) as S

/** `schema` (the journal's failure schema) named `RunFailure`: the same decoding and encoding. */
export const runFailure = <S extends Schema.Schema.Any>(schema: S): S => runFailures(schema) as S
