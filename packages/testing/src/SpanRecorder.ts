/**
 * A tracer that keeps every span it starts, for tests asserting what a run
 * traces: names, attributes, and how each span ended.
 *
 * @since 0.1.0
 */
import type * as Context from "effect/Context"
import type * as Exit from "effect/Exit"
import type * as Option from "effect/Option"
import * as Tracer from "effect/Tracer"

/**
 * A span kept by {@link make}: its name, parent, attributes, links and status
 * (`Ended` with the exit once it ends).
 *
 * @since 0.1.0
 * @category models
 */
export class RecordedSpan implements Tracer.Span {
  readonly _tag = "Span"
  readonly spanId: string
  readonly traceId = "trace"
  readonly sampled = true
  readonly attributes = new Map<string, unknown>()
  readonly links: Array<Tracer.SpanLink>
  status: Tracer.SpanStatus
  constructor(
    readonly name: string,
    readonly parent: Option.Option<Tracer.AnySpan>,
    readonly context: Context.Context<never>,
    links: ReadonlyArray<Tracer.SpanLink>,
    startTime: bigint,
    readonly kind: Tracer.SpanKind,
    id: number
  ) {
    this.spanId = `span${id}`
    this.links = [...links]
    this.status = { _tag: "Started", startTime }
  }
  /**
   * @since 0.1.0
   */
  end(endTime: bigint, exit: Exit.Exit<unknown, unknown>): void {
    this.status = { _tag: "Ended", startTime: this.status.startTime, endTime, exit }
  }
  /**
   * @since 0.1.0
   */
  attribute(key: string, value: unknown): void {
    this.attributes.set(key, value)
  }
  /**
   * @since 0.1.0
   */
  event(): void {}
  /**
   * @since 0.1.0
   */
  addLinks(links: ReadonlyArray<Tracer.SpanLink>): void {
    this.links.push(...links)
  }
}

/**
 * A tracer and the spans it has started so far, in start order.
 *
 * @example
 * ```ts
 * import { SpanRecorder } from "@stepwise-agent/testing"
 * import { Effect } from "effect"
 *
 * const { spans, tracer } = SpanRecorder.make()
 * Effect.runSync(Effect.void.pipe(Effect.withSpan("work"), Effect.withTracer(tracer)))
 * spans.map((span) => span.name) // ["work"]
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (): { readonly spans: ReadonlyArray<RecordedSpan>; readonly tracer: Tracer.Tracer } => {
  const spans: Array<RecordedSpan> = []
  const tracer = Tracer.make({
    span: (name, parent, context, links, startTime, kind) => {
      const span = new RecordedSpan(name, parent, context, links, startTime, kind, spans.length)
      spans.push(span)
      return span
    },
    context: (f) => f()
  })
  return { spans, tracer }
}
