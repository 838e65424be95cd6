import { Tool, Toolkit } from "@effect/ai"
import { FetchHttpClient } from "@effect/platform"
import { assert, describe, it } from "@effect/vitest"
import { Agent, Middleware } from "@stepwise-agent/core"
import { ScriptedModel } from "@stepwise-agent/testing"
import { Effect, Layer, Schema } from "effect"
import * as Http from "node:http"
import * as TraceExport from "../src/TraceExport.js"

interface Received {
  readonly method: string
  readonly url: string
  readonly contentType: string
  readonly body: any
}

/** An HTTP server on 127.0.0.1 that keeps every request it receives (a stand-in OTLP collector). */
const collector = Effect.acquireRelease(
  Effect.async<{ readonly server: Http.Server; readonly received: Array<Received>; readonly port: number }>(
    (resume) => {
      const received: Array<Received> = []
      const server = Http.createServer((request, response) => {
        let body = ""
        request.setEncoding("utf8")
        request.on("data", (chunk) => body += chunk)
        request.on("end", () => {
          received.push({
            method: request.method ?? "",
            url: request.url ?? "",
            contentType: request.headers["content-type"] ?? "",
            body: JSON.parse(body)
          })
          response.writeHead(200, { "content-type": "application/json" }).end("{}")
        })
      })
      server.listen(0, "127.0.0.1", () => {
        const address = server.address()
        resume(Effect.succeed({ server, received, port: typeof address === "object" && address ? address.port : 0 }))
      })
    }
  ),
  ({ server }) =>
    Effect.async<void>((resume) => {
      server.closeAllConnections()
      server.close(() => resume(Effect.void))
    })
)

const Add = Tool.make("add", { parameters: { a: Schema.Number, b: Schema.Number }, success: Schema.Number })
const Tools = Toolkit.make(Add)

const audit = Middleware.make({
  name: "audit",
  wrapToolCall: (request, next) => Effect.zipRight(Middleware.report(`allowing ${request.call.name}`), next(request))
})

describe("TraceExport", () => {
  it.scopedLive("sends the run's hook, model and tool spans to the collector as OTLP JSON", () =>
    Effect.gen(function*() {
      const { port, received } = yield* collector
      const program = Effect.gen(function*() {
        const agent = yield* Agent.make({ toolkit: Tools, middleware: [audit] })
        return yield* agent.run("What is 2 + 3?", { threadId: "t1" })
      }).pipe(
        Effect.provide(Tools.toLayer({ add: ({ a, b }) => Effect.succeed(a + b) })),
        Effect.provide(ScriptedModel.layer([
          ScriptedModel.toolCalls([{ name: "add", params: { a: 2, b: 3 } }]),
          ScriptedModel.text("5")
        ]))
      )
      // No `spans: true`: an exporting tracer is enough. Releasing the layer sends what is left.
      const result = yield* program.pipe(
        Effect.provide(
          TraceExport.layer({ url: `http://127.0.0.1:${port}/v1/traces`, serviceName: "inspector-test" }).pipe(
            Layer.provide(FetchHttpClient.layer)
          )
        )
      )
      assert.strictEqual(result._tag, "Completed")
      assert.isAbove(received.length, 0)
      for (const request of received) {
        assert.strictEqual(request.method, "POST")
        assert.strictEqual(request.url, "/v1/traces")
        assert.include(request.contentType, "application/json")
      }
      const resourceSpans = received.flatMap((request) => request.body.resourceSpans as Array<any>)
      const serviceNames = resourceSpans.flatMap((resource) =>
        (resource.resource.attributes as Array<any>).filter((attribute) => attribute.key === "service.name").map((
          attribute
        ) => attribute.value.stringValue)
      )
      assert.deepStrictEqual([...new Set(serviceNames)], ["inspector-test"])
      const spans = resourceSpans.flatMap((resource) =>
        (resource.scopeSpans as Array<any>).flatMap((scope) => scope.spans as Array<any>)
      )
      const names = new Set(spans.map((span) => span.name as string))
      for (const name of ["Agent.run", "Agent.modelCall", "Agent.toolCall", "Middleware.wrapToolCall"]) {
        assert.isTrue(names.has(name), `span ${name} exported (got ${[...names].join(", ")})`)
      }
      const hook = spans.find((span) => span.name === "Middleware.wrapToolCall")
      const attributes = Object.fromEntries(
        (hook.attributes as Array<any>).map((attribute) => [attribute.key, attribute.value.stringValue])
      )
      assert.strictEqual(attributes["middleware"], "audit")
      assert.strictEqual(attributes["decision"], "allowing add")
      const run = spans.find((span) => span.name === "Agent.run")
      assert.isTrue(spans.every((span) => span.traceId === run.traceId))
    }))
  it.scopedLive("exports no credential a tool's defect, a log line or a span attribute holds", () =>
    Effect.gen(function*() {
      const { port, received } = yield* collector
      const key = "Zq7vN3pL0xW9rT2kB5mY8cJ4"
      const program = Effect.gen(function*() {
        const agent = yield* Agent.make({ toolkit: Tools })
        return yield* agent.run("What is 2 + 3?", { threadId: "t1" })
      }).pipe(
        Effect.provide(Tools.toLayer({
          add: () =>
            Effect.annotateCurrentSpan("upstream", `x-api-key: ${key}`).pipe(
              Effect.zipRight(Effect.logWarning(`calling with api_key=${key}`)),
              Effect.zipRight(Effect.die(new Error(`upstream refused {"api_key":"${key}"}`)))
            )
        })),
        Effect.provide(ScriptedModel.layer([
          ScriptedModel.toolCalls([{ name: "add", params: { a: 2, b: 3 } }]),
          ScriptedModel.text("5")
        ]))
      )
      yield* program.pipe(
        Effect.exit,
        Effect.provide(
          TraceExport.layer({ url: `http://127.0.0.1:${port}/v1/traces` }).pipe(Layer.provide(FetchHttpClient.layer))
        )
      )
      const exported = JSON.stringify(received.map((request) => request.body))
      assert.include(exported, "Agent.toolCall")
      assert.notInclude(exported, key)
    }))
})
