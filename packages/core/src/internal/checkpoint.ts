/**
 * A run's checkpoints: what a save stores (the thread, the slices and, while
 * the run waits, its progress), how a thread is loaded back, and the
 * incremental encoding that keeps a save's cost to the new messages.
 */
import type * as Prompt from "@effect/ai/Prompt"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import type * as ParseResult from "effect/ParseResult"
import type * as Types from "effect/Types"
import { CheckpointError, describeParseError } from "../AgentError.js"
import * as AgentState from "../AgentState.js"
import type * as Checkpointer from "../Checkpointer.js"
import * as RunJournal from "../RunJournal.js"
import * as DeferredSave from "./deferredSave.js"
import * as IdentityTable from "./fast/identityTable.js"
import * as Lineage from "./fast/lineage.js"
import type { RunContext } from "./runContext.js"
import * as RunState from "./runState.js"
import type { StepKeys } from "./stepKeys.js"

/**
 * The decoded thread of each stored message array this process encoded or
 * decoded (compared by reference), so loading back a thread this process
 * saved costs one lookup, not one per message. An encoder keeps only the entry
 * of its last save: V8's young-generation collector keeps a `WeakMap`'s values
 * alive whether or not their keys are, so an entry per step would carry every
 * step's thread through a collection.
 */
const decodedThreads = IdentityTable.make<ReadonlyArray<unknown>, ReadonlyArray<Prompt.Message>>()

/**
 * The thread in its stored form, reusing what the last save of this run (or
 * the load it started from) already encoded, compared by reference: a
 * checkpoint encodes only the new messages, and slices no hook changed since
 * are not encoded again. A thread is given as an array and a length: the run
 * may grow its messages array in place after a save (`RunState.unseen`),
 * and a save holds only the messages it was given.
 */
export class ThreadEncoder {
  private messages: ReadonlyArray<Prompt.Message> | undefined
  /** How many of `messages` were encoded. */
  private length = 0
  private encoded: ReadonlyArray<unknown> = []
  /** The entry of `decodedThreads` this encoder made last. */
  private remembered: ReadonlyArray<unknown> | undefined
  /** The messages of the last {@link deferred} save, and what builds their stored form (`final`: the run ended). */
  private pending:
    | {
      readonly messages: ReadonlyArray<Prompt.Message>
      readonly length: number
      readonly build: (final: boolean) => ReadonlyArray<unknown>
    }
    | undefined
  private slices: object | undefined
  private encodedSlices: Record<string, unknown> | undefined

  constructor(loaded?: Loaded) {
    if (loaded !== undefined && Option.isSome(loaded.checkpoint)) {
      this.messages = loaded.messages
      this.length = loaded.messages.length
      this.encoded = loaded.checkpoint.value.messages
    }
  }

  /**
   * The stored form of the first `length` of `messages`. `growable`: the run may still grow `messages` in
   * place, so the thread a later load of this stored form gives is a copy.
   */
  encode(messages: ReadonlyArray<Prompt.Message>, length: number, growable: boolean): ReadonlyArray<unknown> {
    const previous = this.messages
    if (previous === messages && this.length === length) return this.encoded
    const shared = previous === undefined ? 0 : Lineage.sharedPrefix(previous, messages, this.length, length)
    const added = AgentState.encodeMessages(
      shared === 0 && length === messages.length ? messages : messages.slice(shared, length)
    )
    const base = this.encoded
    this.encoded = shared === 0
      ? added
      : shared === base.length
      ? Lineage.append(base, added)
      : Lineage.derive(base.slice(0, shared).concat(added), base, shared)
    this.messages = messages
    this.length = length
    if (this.remembered !== undefined) decodedThreads.delete(this.remembered)
    decodedThreads.set(this.encoded, growable || length !== messages.length ? messages.slice(0, length) : messages)
    this.remembered = this.encoded
    return this.encoded
  }

  /**
   * {@link encode}, deferred (for a checkpointer with `append`): the messages
   * new since the last save are encoded now (a message that does not encode
   * fails the save, as before), the array
   * of the whole thread is built when something first asks for it, at the
   * latest when the run ends ({@link settle}). `growable`: as for
   * {@link encode}; the save holds `messages` with its length now.
   */
  deferred(
    checkpoint: Omit<Checkpointer.Checkpoint, "messages">,
    messages: ReadonlyArray<Prompt.Message>,
    growable: boolean
  ): Checkpointer.DeferredCheckpoint {
    const length = messages.length
    if (messages === this.messages && length === this.length) {
      const encoded = this.encoded
      return new DeferredThread(checkpoint, messages, length, () => encoded)
    }
    const previous = this.pending?.messages ?? this.messages
    const previousLength = this.pending?.length ?? this.length
    const shared = previous === undefined ? 0 : Lineage.sharedPrefix(previous, messages, previousLength, length)
    if (shared < length) AgentState.encodeMessages(shared === 0 ? messages : messages.slice(shared))
    let built: ReadonlyArray<unknown> | undefined
    let from: {
      readonly encoder: ThreadEncoder
      readonly messages: ReadonlyArray<Prompt.Message>
      readonly length: number
      readonly growable: boolean
    } | undefined = { encoder: this, messages, length, growable }
    const build = (final: boolean) => {
      if (from !== undefined) {
        built = from.encoder.encode(from.messages, from.length, from.growable && !final)
        from = undefined
      }
      return built!
    }
    this.pending = { messages, length, build }
    return new DeferredThread(checkpoint, messages, length, () => build(false))
  }

  /** Builds the stored form of the last deferred save, so that no stored checkpoint still holds this encoder. */
  settle(): void {
    this.pending?.build(true)
    this.pending = undefined
  }

  /** The encoding of `slices` kept by `keepSlices`, if `slices` is the object it was made of. */
  slicesOf(slices: object): Record<string, unknown> | undefined {
    return slices === this.slices ? this.encodedSlices : undefined
  }

  keepSlices(slices: object, encoded: Record<string, unknown>): void {
    this.slices = slices
    this.encodedSlices = encoded
  }
}

/**
 * A deferred save of a run's thread, the first `count` of `decoded`: its
 * encoded messages come from the decoded ones (each message's encoding is
 * cached, so they are the objects the whole array holds), and whether it
 * extends an earlier save is told by comparing the decoded arrays, whose
 * lineage the loop records.
 */
class DeferredThread implements Checkpointer.DeferredCheckpoint {
  constructor(
    readonly checkpoint: Omit<Checkpointer.Checkpoint, "messages">,
    private readonly decoded: ReadonlyArray<Prompt.Message>,
    private readonly count: number,
    readonly messages: () => ReadonlyArray<unknown>
  ) {}

  get length(): number {
    return this.count
  }

  from(index: number): ReadonlyArray<unknown> {
    return AgentState.encodeMessages(
      index === 0 && this.count === this.decoded.length ? this.decoded : this.decoded.slice(index, this.count)
    )
  }

  extends(previous: Checkpointer.DeferredCheckpoint): boolean {
    if (previous instanceof DeferredThread) {
      return this.count >= previous.count &&
        Lineage.sharedPrefix(previous.decoded, this.decoded, previous.count, this.count) === previous.count
    }
    const base = previous instanceof DeferredSave.WholeThread
      ? decodedThreads.get(previous.whole.messages)
      : undefined
    // a thread this process neither encoded nor decoded: compared encoded, built
    if (base === undefined) return DeferredSave.extendsByReference(previous.messages(), this.messages())
    return this.count >= base.length &&
      Lineage.sharedPrefix(base, this.decoded, base.length, this.count) === base.length
  }
}

/**
 * What the first save of a run that loaded `loaded` expects the store to hold (`RunState.expected`): no thread
 * for a new thread (or a replayed fork's), else the incarnation loaded.
 */
export const expectedOf = (loaded: Loaded): Checkpointer.Expected =>
  loaded.stored ? { incarnation: loaded.incarnation } : "absent"

/** A thread as loaded: its messages and slices, and the checkpoint they came from. */
export interface Loaded {
  readonly messages: ReadonlyArray<Prompt.Message>
  readonly slices: Record<string, object>
  readonly checkpoint: Option.Option<Checkpointer.Checkpoint>
  /** The thread's incarnation (see `Checkpointer.Checkpoint`); `undefined` for a checkpoint stored without one. */
  readonly incarnation: string | undefined
  /** Whether the store holds the thread loaded (not for a new thread, nor for a replayed fork's: `RunJournal.Service.forksThread`). */
  readonly stored: boolean
}

/** A new incarnation nonce: 64 bits from the context's `Random` (a test may seed it), in one operation. */
export const newIncarnation: Effect.Effect<string> = Effect.randomWith((random) =>
  // (not `Effect.zipWith`, which runs its two effects through `Effect.all`: a dozen operations more)
  Effect.flatMap(random.nextIntBetween(0, 0x100000000), (high) =>
    Effect.map(
      random.nextIntBetween(0, 0x100000000),
      (low) => high.toString(16).padStart(8, "0") + low.toString(16).padStart(8, "0")
    ))
)

/** Whether `checkpoint` is the empty one the load of a new thread gives (`withIncarnation`): nothing is stored. */
export const isUnsaved = (checkpoint: Checkpointer.Checkpoint): boolean =>
  checkpoint.messages.length === 0 && Object.keys(checkpoint.slices).length === 0 &&
  checkpoint.pending === undefined && checkpoint.run === undefined

/** `checkpoint` without an incarnation. */
export const withoutIncarnation = (checkpoint: Checkpointer.Checkpoint): Checkpointer.Checkpoint => {
  const { incarnation: _incarnation, ...rest } = checkpoint
  return rest
}

/**
 * The checkpoint a run starts from, with the thread's incarnation: a new
 * thread is given one (as an empty checkpoint), a checkpoint stored without
 * one gets one, unless it waits (its wait was made, and its decisions built,
 * without one: it resumes as it was). Made inside the run's load step, so a
 * durable run replaying its journal gets the same incarnation again.
 */
const withIncarnation = (
  threadId: string,
  stored: Option.Option<Checkpointer.Checkpoint>
): Effect.Effect<Option.Option<Checkpointer.Checkpoint>> =>
  hasIncarnation(stored)
    ? Effect.succeed(stored)
    : Effect.map(newIncarnation, (incarnation) => incarnated(threadId, stored, incarnation))

/** Whether a run starts from `stored` as it is (`withIncarnation`): it has an incarnation, or it waits. */
const hasIncarnation = (stored: Option.Option<Checkpointer.Checkpoint>): boolean =>
  Option.isSome(stored) && (stored.value.incarnation !== undefined || stored.value.pending !== undefined)

/** `stored` with `incarnation` (`withIncarnation`); a new thread as an empty checkpoint. */
const incarnated = (
  threadId: string,
  stored: Option.Option<Checkpointer.Checkpoint>,
  incarnation: string
): Option.Option<Checkpointer.Checkpoint> =>
  Option.some(
    Option.isSome(stored)
      ? { ...stored.value, incarnation }
      : { version: 1, threadId, messages: [], slices: {}, incarnation }
  )

const decodeThread = (
  encoded: ReadonlyArray<unknown>
): Effect.Effect<ReadonlyArray<Prompt.Message>, ParseResult.ParseError> => {
  const known = decodedThreads.get(encoded)
  if (known !== undefined) return Effect.succeed(known)
  return Effect.map(AgentState.decodeMessages(encoded), (messages) => {
    decodedThreads.set(encoded, messages)
    return messages
  })
}

/**
 * `checkpoint` (a save's version, thread id, slices, and messages unless it
 * is deferred) with the run's incarnation, and with `pending` the wait it
 * stops at and the run's progress: the fields in the order a store writes them.
 */
const completed = <C extends Omit<Checkpointer.Checkpoint, "messages">>(
  checkpoint: Types.Mutable<C>,
  run: RunContext,
  state: RunState.RunState,
  pending: Checkpointer.PendingInterrupt | undefined
): C => {
  if (run.incarnation !== undefined) checkpoint.incarnation = run.incarnation
  if (pending !== undefined) {
    checkpoint.pending = pending
    checkpoint.run = {
      step: state.step,
      inputTokens: state.usage.inputTokens,
      outputTokens: state.usage.outputTokens,
      totalTokens: state.usage.totalTokens
    }
  }
  return checkpoint
}

/** Saving and loading a thread of an agent with this state layout, in this store. */
export const make = (layout: AgentState.Layout, checkpointer: Checkpointer.Service) => {
  /**
   * Saves the run's thread, over the thread `state` expects the store to hold; with `pending`, the wait it stops
   * at and its progress so far. Gives the state once saved (`RunState.saved`: what the next save expects).
   */
  const save = (
    run: RunContext,
    state: RunState.RunState,
    pending: Checkpointer.PendingInterrupt | undefined
  ): Effect.Effect<RunState.RunState, CheckpointError> => {
    const write = (slices: Record<string, unknown>) => {
      const options: Checkpointer.SaveOptions = { expected: state.expected }
      const stored = checkpointer.append === undefined
        ? checkpointer.save(
          run.threadId,
          completed<Checkpointer.Checkpoint>(
            {
              version: 1,
              threadId: run.threadId,
              messages: run.encoder.encode(
                state.messages,
                state.messages.length,
                state.unseen === state.messages
              ),
              slices
            },
            run,
            state,
            pending
          ),
          options
        )
        : checkpointer.append(
          run.threadId,
          run.encoder.deferred(
            completed<Omit<Checkpointer.Checkpoint, "messages">>(
              { version: 1, threadId: run.threadId, slices },
              run,
              state,
              pending
            ),
            state.messages,
            state.unseen === state.messages
          ),
          options
        )
      return Effect.map(run.journal.step(run.keys.checkpoint(), stored), () => {
        run.saves.saved(state)
        return RunState.saved(state, run.incarnation)
      })
    }
    const known = run.encoder.slicesOf(state.slices)
    if (known !== undefined) return write(known)
    return layout.encodeSlices(state.slices).pipe(
      Effect.mapError((error) =>
        new CheckpointError({
          threadId: run.threadId,
          operation: "save",
          reason: `a state slice does not encode: ${describeParseError(error)}`
        })
      ),
      Effect.flatMap((slices) => {
        run.encoder.keepSlices(state.slices, slices)
        return write(slices)
      })
    )
  }

  /**
   * The thread's last checkpoint, decoded; an empty thread when it has none.
   * With `journaled`, a step of the run: replayed, it gives what it gave then;
   * the run's thread has an incarnation (`withIncarnation`).
   */
  const load = (
    threadId: string,
    journaled?: { readonly journal: RunJournal.Service; readonly keys: StepKeys }
  ): Effect.Effect<Loaded, CheckpointError> => {
    const loaded = loadedOf(threadId, journaled?.journal.forksThread !== true)
    if (journaled === undefined) return Effect.flatMap(checkpointer.load(threadId), loaded)
    // in process the step runs as it is: the incarnation and the decode go on from the load itself
    if (journaled.journal === RunJournal.inProcess) {
      return Effect.flatMap(checkpointer.load(threadId), (stored) =>
        hasIncarnation(stored)
          ? loaded(stored)
          : Effect.flatMap(newIncarnation, (incarnation) => loaded(incarnated(threadId, stored, incarnation))))
    }
    return Effect.flatMap(
      journaled.journal.step(
        journaled.keys.load(),
        Effect.flatMap(checkpointer.load(threadId), (stored) => withIncarnation(threadId, stored))
      ),
      loaded
    )
  }

  /**
   * The thread a load of `threadId` gives, decoded; an empty thread when it has none. `inStore`: whether a
   * thread the load gives is the store's (not a replayed fork's).
   */
  const loadedOf = (threadId: string, inStore: boolean) =>
  (
    stored: Option.Option<Checkpointer.Checkpoint>
  ): Effect.Effect<Loaded, CheckpointError> => {
    if (Option.isNone(stored)) {
      return Effect.succeed({
        messages: [],
        slices: layout.initial,
        checkpoint: Option.none(),
        incarnation: undefined,
        stored: false
      })
    }
    const checkpoint = stored.value
    // a new thread's load gives only its incarnation: nothing to decode
    if (isUnsaved(checkpoint)) {
      return Effect.succeed({
        messages: [],
        slices: layout.initial,
        checkpoint: Option.none(),
        incarnation: checkpoint.incarnation,
        stored: false
      })
    }
    return Effect.flatMap(
      decodeThread(checkpoint.messages),
      (messages) =>
        Effect.map(layout.decodeSlices(checkpoint.slices), (slices): Loaded => ({
          messages,
          slices,
          checkpoint: stored,
          incarnation: checkpoint.incarnation,
          stored: inStore
        }))
    ).pipe(
      Effect.mapError((error) =>
        new CheckpointError({
          threadId,
          operation: "load",
          reason: `the stored state does not decode: ${describeParseError(error)}`
        })
      )
    )
  }

  return { save, load } as const
}
