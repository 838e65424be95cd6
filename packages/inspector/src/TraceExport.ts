/**
 * Sends the spans of agent runs to an OpenTelemetry collector (Jaeger,
 * Grafana Tempo, Honeycomb, the OpenTelemetry Collector, …) as OTLP/HTTP
 * JSON, through `@effect/opentelemetry`'s `OtlpTracer` and an
 * `@effect/platform` `HttpClient` of your choice.
 *
 * Installing the layer installs a tracer other than Effect's built-in one,
 * so agents make their per-hook, per-model-call and per-tool-call spans
 * (`Middleware.<hook>`, `Agent.modelCall`, `Agent.toolCall`) without
 * `Agent.make({ spans: true })`. Spans go in batches; the rest are sent when
 * the layer is released.
 *
 * Works with `@effect/opentelemetry` 0.64.1 on `@effect/platform` 0.97 and
 * `effect` 3.22 (its `latest` tag is for Effect 4).
 *
 * @since 0.1.0
 */
import * as OtlpSerialization from "@effect/opentelemetry/OtlpSerialization"
import * as OtlpTracer from "@effect/opentelemetry/OtlpTracer"
import type * as Headers from "@effect/platform/Headers"
import type * as HttpClient from "@effect/platform/HttpClient"
import type * as AgentError from "@stepwise-agent/core/AgentError"
import * as Secrets from "@stepwise-agent/core/Secrets"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { keysOf, unknownKey } from "./internal/options.js"

/**
 * Options of {@link layer}.
 *
 * @since 0.1.0
 * @category models
 */
export interface Options {
  /** The collector's traces endpoint (default `"http://127.0.0.1:4318/v1/traces"`, OTLP/HTTP's usual port). */
  readonly url?: string | undefined
  /** The `service.name` of the spans (default `"stepwise"`). */
  readonly serviceName?: string | undefined
  readonly serviceVersion?: string | undefined
  /** Headers of each export request, e.g. an API key of a hosted backend. */
  readonly headers?: Headers.Input | undefined
  /** How often batches are sent (default 5 seconds). */
  readonly exportInterval?: Duration.DurationInput | undefined
}

const defaultUrl = "http://127.0.0.1:4318/v1/traces"

const optionKeys = keysOf<Options>({
  url: true,
  serviceName: true,
  serviceVersion: true,
  headers: true,
  exportInterval: true
})

/**
 * Exports every span of the effect it is provided to. Needs an
 * `HttpClient` (`NodeHttpClient.layerUndici`, `FetchHttpClient.layer`); the
 * export requests themselves are not traced. Options with a key it does not
 * know fail with `AgentError.InvalidOptions` naming it.
 *
 * @example
 * ```ts
 * import { Agent } from "@stepwise-agent/core"
 * import { TraceExport } from "@stepwise-agent/inspector"
 * import { NodeHttpClient } from "@effect/platform-node"
 * import { Effect, Layer } from "effect"
 *
 * const TracingLive = TraceExport.layer({ serviceName: "support-agent" }).pipe(
 *   Layer.provide(NodeHttpClient.layerUndici)
 * )
 * const program = Effect.gen(function*() {
 *   const agent = yield* Agent.make({ systemPrompt: "Be brief." })
 *   return yield* agent.run("hello", { threadId: "t1" })
 * })
 * // program.pipe(Effect.provide(TracingLive), ...)
 * ```
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (
  options?: Options | undefined
): Layer.Layer<never, AgentError.InvalidOptions, HttpClient.HttpClient> =>
  Layer.unwrapScoped(Effect.gen(function*() {
    const unknown = unknownKey("TraceExport", options, optionKeys)
    if (unknown !== undefined) return yield* unknown
    const tracer = yield* OtlpTracer.make({
      url: options?.url ?? defaultUrl,
      resource: {
        serviceName: options?.serviceName ?? "stepwise",
        serviceVersion: options?.serviceVersion
      },
      headers: options?.headers,
      exportInterval: options?.exportInterval
    })
    // what a span records (a failure, a log line) is scrubbed of credentials before it is exported
    return Layer.setTracer(Secrets.scrubTracer(tracer))
  })).pipe(Layer.provide(OtlpSerialization.layerJson))
