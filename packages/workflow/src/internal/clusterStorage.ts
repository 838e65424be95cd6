/**
 * What the workflow reads and writes past the public API of `@effect/cluster`
 * and `@effect/workflow`: the journal of an execution in cluster storage
 * (does it exist, clear it), and the exit schema of activities. The one file
 * that reaches into them: an upgrade of either package is checked here.
 */
import * as ClusterSchema from "@effect/cluster/ClusterSchema"
import * as EntityAddress from "@effect/cluster/EntityAddress"
import * as EntityId from "@effect/cluster/EntityId"
import * as EntityType from "@effect/cluster/EntityType"
import * as MessageStorage from "@effect/cluster/MessageStorage"
import * as Sharding from "@effect/cluster/Sharding"
import type * as Activity from "@effect/workflow/Activity"
import type * as Workflow from "@effect/workflow/Workflow"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"

/**
 * The journal of an execution in cluster storage, when the engine keeps
 * one there (the durable layers): its storage and the address of its
 * entity of each type.
 */
const journalOf = (workflow: Workflow.Any, executionId: string) =>
  Effect.gen(function*() {
    const sharding = yield* Effect.serviceOption(Sharding.Sharding)
    const storage = yield* Effect.serviceOption(MessageStorage.MessageStorage)
    if (Option.isNone(sharding) || Option.isNone(storage)) return Option.none()
    const entityId = EntityId.make(executionId)
    const shardId = sharding.value.getShardId(
      entityId,
      Context.get(workflow.annotations, ClusterSchema.ShardGroup)(entityId)
    )
    const addressOf = (type: string) =>
      new EntityAddress.EntityAddress({ shardId, entityType: EntityType.EntityType.make(type), entityId })
    return Option.some({ storage: storage.value, addressOf })
  })

/** Clears the journal of an execution: the run's own entity, and the clocks of its decision timeouts. */
export const clearJournal = (workflow: Workflow.Any, executionId: string) =>
  Effect.flatMap(journalOf(workflow, executionId), (journal) =>
    Option.isNone(journal) ? Effect.void : Effect.forEach(
      [`Workflow/${workflow.name}`, "Workflow/-/DurableClock"],
      (type) => journal.value.storage.clearAddress(journal.value.addressOf(type)),
      { discard: true }
    ))

/**
 * Whether the engine ever got the execution: `false` for a run registered
 * by a `start` that died before executing it, or whose journal was pruned.
 * The memory engine cannot tell: `true`.
 */
export const executionExists = (workflow: Workflow.Any, executionId: string) =>
  Effect.flatMap(
    journalOf(workflow, executionId),
    (journal) =>
      Option.isNone(journal) ? Effect.succeed(true) : journal.value.storage.requestIdForPrimaryKey({
        address: journal.value.addressOf(`Workflow/${workflow.name}`),
        tag: "run",
        id: ""
      }).pipe(Effect.map(Option.isSome))
  )

/**
 * The exit schema of our activities, one per success and error schema.
 * @effect/workflow 0.19 builds a new one in every `Activity.make`, and its
 * engine compiles a decoder for each: most of an activity's cost on the
 * memory engine.
 */
const exitSchemas = new Map<Schema.Schema.All, Map<Schema.Schema.Any, Schema.Schema.Any>>()

/** `activity` with the exit schema every activity of the same success and error schemas shares. */
export const withSharedExitSchema = <A extends Activity.Any>(activity: A): A => {
  const { errorSchema: failure, successSchema: success } = activity
  let bySuccess = exitSchemas.get(failure)
  if (bySuccess === undefined) {
    bySuccess = new Map()
    exitSchemas.set(failure, bySuccess)
  }
  let schema = bySuccess.get(success)
  if (schema === undefined) {
    schema = Schema.ExitFromSelf({ success, failure, defect: Schema.Defect })
    bySuccess.set(success, schema)
  }
  return Object.assign(activity, { exitSchema: schema })
}
