/**
 * Every sink × every way a client sets a credential: a key a client layer
 * puts in a URL parameter (`?key=…`, which @effect/ai's errors carry as
 * `urlParams: [["key", "…"]]`) or in a header no fixed name list holds
 * (`Ocp-Apim-Subscription-Key`, `x-functions-key`, `x-key`) or in the URL's
 * path (a gateway's `/v1/<key>/…`, an Azure-style deployment, a key of 32 hex
 * digits with no name or shape that tells it is one), its userinfo
 * (`https://user:<key>@…`, `https://<key>@…`) or its fragment
 * (`#access_token=<key>`, `#<key>`), reaching the
 * error as the request it describes (a gateway's HTML 502 labelled JSON puts
 * the whole request in the body), quoted in a gateway's 401 body, or inside a cause
 * chain (a tool that dies wrapping the platform's error of its own request).
 * The real `@effect/ai-openai` client over a fake server on 127.0.0.1 makes
 * the errors; the key reaches none of: the run's failure, the Logging
 * middleware's lines, the inspector's event log and thread, a durable run's
 * `status().failure` and its journal, and (with `Secrets.scrubHttpClient`)
 * spans.
 */
import * as Tool from "@effect/ai/Tool"
import * as Toolkit from "@effect/ai/Toolkit"
import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import * as HttpClient from "@effect/platform/HttpClient"
import * as HttpClientError from "@effect/platform/HttpClientError"
import * as HttpClientRequest from "@effect/platform/HttpClientRequest"
import { assert, describe, it } from "@effect/vitest"
import { Agent, Secrets } from "@stepwise-agent/core"
import * as Inspector from "@stepwise-agent/inspector/Inspector"
import * as Logging from "@stepwise-agent/middleware/Logging"
import { SpanRecorder } from "@stepwise-agent/testing"
import * as FakeOpenAi from "@stepwise-agent/testing/FakeOpenAi"
import * as AgentEngine from "@stepwise-agent/workflow/AgentEngine"
import * as AgentWorkflow from "@stepwise-agent/workflow/AgentWorkflow"
import * as Authorizer from "@stepwise-agent/workflow/Authorizer"
import * as RunStore from "@stepwise-agent/workflow/RunStore"
import * as SqlCheckpointer from "@stepwise-agent/workflow/SqlCheckpointer"
import { Cause, Effect, Exit, HashMap, Layer, Logger, Option, Schema } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"

const key = "AcmeSub-0a1b2c3d4e5f"
/** A key with no name and no shape that says what it is: 32 hex digits. */
const hexKey = "7f3a9c2e41b04d5e8a6f1c2b3d4e5f60"

/** The request's path with a segment inserted after `/v1`, as a gateway's base URL puts its key there. */
const inPath = (segment: string) => (request: HttpClientRequest.HttpClientRequest) =>
  HttpClientRequest.setUrl(request, request.url.replace("/v1/", `/v1/${segment}/`))

/** The request's URL with a userinfo, as a base URL `https://<info>@host` gives it (undici does not send it). */
const inUserInfo = (info: string) => HttpClientRequest.updateUrl((url) => url.replace("://", `://${info}@`))

/** How the client layer sets the key on every request it sends. */
const placements: ReadonlyArray<
  readonly [
    string,
    string,
    (request: HttpClientRequest.HttpClientRequest) => HttpClientRequest.HttpClientRequest
  ]
> = [
  ["a URL parameter ?key=", key, HttpClientRequest.setUrlParam("key", key)],
  ["an Ocp-Apim-Subscription-Key header", key, HttpClientRequest.setHeader("Ocp-Apim-Subscription-Key", key)],
  ["an x-functions-key header", key, HttpClientRequest.setHeader("x-functions-key", key)],
  ["an x-key header", key, HttpClientRequest.setHeader("x-key", key)],
  ["a segment of the URL's path (/v1/<key>/responses)", key, inPath(key)],
  ["a segment of the URL's path with no name or shape (32 hex digits)", hexKey, inPath(hexKey)],
  ["an Azure-style deployment path (/v1/deployments/<key>/responses)", hexKey, inPath(`deployments/${hexKey}`)],
  ["the URL's userinfo password (https://user:<key>@…)", key, inUserInfo(`user:${key}`)],
  ["the URL's userinfo, a token alone (https://<key>@…)", hexKey, inUserInfo(hexKey)],
  ["the URL's fragment (#access_token=<key>)", key, HttpClientRequest.setHash(`access_token=${key}`)],
  ["the URL's fragment, bare (#<key>)", hexKey, HttpClientRequest.setHash(hexKey)]
]

/** The tool of the cause-chain case: it calls the gateway with the key and dies wrapping the platform's error. */
const Lookup = Tool.make("lookup", { parameters: { id: Schema.String }, success: Schema.String })
const Tools = Toolkit.make(Lookup)

const toolsLayer = (
  server: FakeOpenAi.FakeOpenAi,
  place: (r: HttpClientRequest.HttpClientRequest) => HttpClientRequest.HttpClientRequest
) =>
  Tools.toLayer(Effect.gen(function*() {
    const client = HttpClient.mapRequest(yield* HttpClient.HttpClient, place)
    return {
      lookup: () =>
        Effect.gen(function*() {
          const response = yield* client.execute(HttpClientRequest.post(`${server.url}/v1/responses`))
          const body = yield* response.text
          const error = new HttpClientError.ResponseError({
            request: response.request,
            response,
            reason: "StatusCode",
            description: "the gateway refused the call"
          })
          return yield* Effect.die(new Error(`lookup failed: ${body}`, { cause: error }))
        }).pipe(Effect.orDie, Effect.scoped)
    }
  })).pipe(Layer.provide(NodeHttpClient.layerUndici))

const lookupCall = { callId: "c1", name: "lookup", arguments: { id: "42" } }

/** How the key comes back in the failure. */
const failuresOf = (key: string) =>
  [
    // @effect/ai reads the body as JSON, fails, and puts that failure, with the request, in the error's body
    ["the request in the body of an HTML 502 labelled JSON", () => [FakeOpenAi.htmlGateway]],
    ["a gateway's 401 quoting the key", () => [FakeOpenAi.error(401, `Invalid subscription key ${key}. Check it.`)]],
    [
      "a cause chain (a tool dies wrapping its request's error)",
      () => [
        FakeOpenAi.byMode({
          generate: FakeOpenAi.toolCalls([lookupCall]),
          stream: FakeOpenAi.streamToolCalls([lookupCall])
        }),
        FakeOpenAi.error(401, `Invalid subscription key ${key}. Check it.`)
      ]
    ]
  ] as const

const model = (
  server: FakeOpenAi.FakeOpenAi,
  place: (r: HttpClientRequest.HttpClientRequest) => HttpClientRequest.HttpClientRequest
) => FakeOpenAi.languageModel(server, { transformClient: HttpClient.mapRequest(place) })

/** Reads an inspector route (the event log until the thread's failure arrived). */
const get = (base: string, token: string, route: string) =>
  Effect.promise(async () => {
    const controller = new AbortController()
    const timer = setTimeout(() => controller.abort(), 10_000)
    const response = await fetch(`${base}${route}?token=${token}`, { signal: controller.signal })
    const reader = response.body!.getReader()
    let text = ""
    try {
      while (route !== "/events" || !text.includes(`"failure":{`)) {
        const { done, value } = await reader.read()
        if (done) break
        text += new TextDecoder().decode(value)
      }
    } catch {
      // aborted: what arrived is checked
    } finally {
      clearTimeout(timer)
      controller.abort()
    }
    return text
  })

describe("no sink shows a key the client set", () => {
  for (const [placed, key, place] of placements) {
    const assertNoKey = (text: string, where: string) => assert.notInclude(text, key, where)
    for (const [how, script] of failuresOf(key)) {
      it.scopedLive(
        `${placed}, ${how}: the run's failure, Logging's lines and the inspector`,
        () =>
          Effect.gen(function*() {
            const server = yield* FakeOpenAi.make(script())
            const lines: Array<string> = []
            const recording = Logger.replace(
              Logger.defaultLogger,
              Logger.make(({ annotations, message }) => {
                lines.push(JSON.stringify({ message, annotations: Object.fromEntries(HashMap.toEntries(annotations)) }))
              })
            )
            const agent = yield* Agent.make({ toolkit: Tools, middleware: [Logging.middleware()] }).pipe(
              Effect.provide(yield* Layer.build(Layer.merge(model(server, place), toolsLayer(server, place))))
            )
            const inspector = yield* Inspector.make(agent)
            const exit = yield* agent.run("hi", { threadId: "t1" }).pipe(Effect.provide(recording), Effect.exit)

            // the key did leave with the requests (the fake records no query string): the sinks must not show it
            const sent = yield* server.requests
            if (placed.includes("header")) assert.include(JSON.stringify(sent[0]!.headers), key, "the key was sent")
            if (placed.includes("path")) assert.include(sent[0]!.path, key, "the key was sent")
            assert.isTrue(Exit.isFailure(exit))
            if (Exit.isFailure(exit)) {
              const texts = [
                Cause.pretty(exit.cause),
                ...[...Cause.failures(exit.cause), ...Cause.defects(exit.cause)].flatMap((error) => [
                  String(error),
                  JSON.stringify(error),
                  error instanceof Error ? error.message : "",
                  error instanceof Error ? JSON.stringify(error.cause ?? null) : ""
                ])
              ]
              for (const text of texts) assertNoKey(text, "the run's failure")
              assert.include(texts[0], how.startsWith("a cause chain") ? "lookup failed" : "HttpResponseError")
              assert.include(texts.join("\n"), Secrets.redacted)
            }
            assert.isTrue(lines.some((line) => line.includes("failed")), "Logging logged the failure")
            for (const line of lines) assertNoKey(line, "a log line")

            const token = new URL(inspector.url).searchParams.get("token")!
            const base = `http://127.0.0.1:${inspector.port}`
            const events = yield* get(base, token, "/events")
            assert.include(events, `"RunFailed"`)
            assertNoKey(events, "the inspector's event log")
            assertNoKey(yield* get(base, token, "/api/threads/t1"), "the inspector's thread")
          }),
        { timeout: 60_000 }
      )

      it.scopedLive(
        `${placed}, ${how}: a durable run's status().failure and journal (SQLite)`,
        () =>
          Effect.gen(function*() {
            const directory = yield* Effect.acquireRelease(
              Effect.sync(() => fs.mkdtempSync(path.join(os.tmpdir(), "stepwise-secrets-matrix-"))),
              (directory) => Effect.sync(() => fs.rmSync(directory, { recursive: true, force: true }))
            )
            const server = yield* FakeOpenAi.make(script())
            const Runs = AgentWorkflow.make({ name: "secret-agent", version: 1 })
            const context = yield* Layer.build(Runs.layer.pipe(
              Layer.provideMerge(Agent.layer({ toolkit: Tools })),
              Layer.provide(Layer.merge(model(server, place), toolsLayer(server, place))),
              Layer.provideMerge(Layer.mergeAll(SqlCheckpointer.layer(), RunStore.layer())),
              Layer.provideMerge(Authorizer.layer(() => true)),
              Layer.provideMerge(
                AgentEngine.layerSqlite({ filename: path.join(directory, "runs.db"), pollInterval: "100 millis" })
              )
            ))
            const run = <A, E>(effect: Effect.Effect<A, E, any>) =>
              Effect.provide(effect, context) as Effect.Effect<A, E>
            const runId = yield* run(Runs.start({ threadId: "t", input: "hi" }))
            const status = yield* run(Runs.await(runId))

            assert.strictEqual(status.state, "Failed")
            const failure = Option.getOrThrow(status.failure)
            assert.include(
              JSON.stringify(failure),
              how.startsWith("a cause chain") ? "ToolDefect" : "HttpResponseError"
            )
            for (const text of [String(failure), JSON.stringify(failure), Cause.pretty(Cause.fail(failure))]) {
              assertNoKey(text, "status().failure")
            }
            // every byte the database holds: the journal, the run records, the checkpoints
            const stored = fs.readdirSync(directory).map((file) =>
              fs.readFileSync(path.join(directory, file)).toString("latin1")
            )
            for (const bytes of stored) assertNoKey(bytes, "the SQLite database")
          }),
        { timeout: 60_000 }
      )
    }
  }
})

describe("no span shows a key the client set (with Secrets.scrubHttpClient)", () => {
  for (const [placed, key, place] of placements) {
    const assertNoKey = (text: string, where: string) => assert.notInclude(text, key, where)
    for (const [how, script] of failuresOf(key).slice(0, 2)) {
      it.scoped(`${placed}, ${how}`, () =>
        Effect.gen(function*() {
          const { spans, tracer } = SpanRecorder.make()
          const server = yield* FakeOpenAi.make(script())
          const agent = yield* Agent.make({ toolkit: Tools, middleware: [Logging.middleware()] }).pipe(
            Effect.provide(
              yield* Layer.build(Layer.merge(
                FakeOpenAi.languageModel(server, {
                  // the key is set under the scrubbing client, as a provider layer sets its own
                  transformClient: (client) => Secrets.scrubHttpClient(HttpClient.mapRequest(client, place))
                }),
                toolsLayer(server, place)
              ))
            )
          )
          yield* Effect.exit(agent.run("hi", { threadId: "t" })).pipe(Effect.withTracer(tracer))
          const failed = spans.filter((span) => span.status._tag === "Ended" && Exit.isFailure(span.status.exit))
          assert.isTrue(failed.some((span) => span.name === "LanguageModel.generateText"))
          for (const span of spans) {
            const exit = span.status._tag === "Ended" ? span.status.exit : Exit.void
            const text = [
              Exit.isFailure(exit) ? Cause.pretty(exit.cause) : "",
              Exit.isFailure(exit) ? JSON.stringify(Cause.squash(exit.cause)) : "",
              JSON.stringify([...span.attributes])
            ].join("\n")
            assertNoKey(text, span.name)
          }
        }), { timeout: 60_000 })
    }
  }
})
