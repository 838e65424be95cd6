/**
 * A second process for the cross-instance tests of
 * `Checkpointer.layerFileSystem`: deletes thread `THREAD` in `DIRECTORY`,
 * printing `deleting` before and `deleted` after.
 */
import * as NodeContext from "@effect/platform-node/NodeContext"
import { Checkpointer } from "@stepwise-agent/core"
import { Effect } from "effect"

const program = Effect.gen(function*() {
  const checkpointer = yield* Checkpointer.makeFileSystem(process.env["DIRECTORY"]!)
  yield* Effect.sync(() => console.log("deleting"))
  yield* checkpointer.delete(process.env["THREAD"]!)
  yield* Effect.sync(() => console.log("deleted"))
})

Effect.runPromise(program.pipe(Effect.provide(NodeContext.layer))).catch((error) => {
  console.error(error)
  process.exit(1)
})
