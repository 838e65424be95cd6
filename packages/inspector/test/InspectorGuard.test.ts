import { assert, describe, it } from "@effect/vitest"
import type { Agent } from "@stepwise-agent/core"
import { HumanInTheLoop } from "@stepwise-agent/middleware"
import { Effect, FastCheck, Option } from "effect"
import * as Http from "node:http"
import * as Inspector from "../src/Inspector.js"
import * as Guard from "../src/internal/guard.js"
import * as Wire from "../src/internal/wire.js"
import { approvalScript, eventually, pendingOf, setup } from "./fixtures.js"

interface Answer {
  readonly status: number
  readonly body: string
  /** How many body bytes the client had sent when the answer's headers arrived. */
  readonly sentBefore: number
}

/**
 * A request through `node:http`, which lets a test set `Host` and `Origin`
 * freely. `chunks` bytes of body go out in 64 KiB writes (chunked unless
 * `content-length` is set) until they are all sent or the answer arrives.
 */
const send = (
  port: number,
  path: string,
  options: {
    readonly method?: string
    readonly headers?: Record<string, string>
    readonly body?: string
    readonly streamBytes?: number
  } = {}
) =>
  Effect.async<Answer, Error>((resume) => {
    let sent = 0
    let answered = false
    const request = Http.request({
      host: "127.0.0.1",
      port,
      path,
      method: options.method ?? "GET",
      headers: options.headers,
      agent: false
    }, (response) => {
      answered = true
      const sentBefore = sent
      let body = ""
      response.setEncoding("utf8")
      response.on("data", (chunk: string) => body += chunk)
      response.on("end", () => resume(Effect.succeed({ status: response.statusCode ?? 0, body, sentBefore })))
      response.on("error", (error) => resume(Effect.fail(error)))
    })
    // once answered, a refused upload may see its connection closed under it
    request.on("error", (error) => answered ? undefined : resume(Effect.fail(error)))
    if (options.streamBytes === undefined) {
      request.end(options.body)
      return Effect.sync(() => request.destroy())
    }
    const chunk = Buffer.alloc(64 * 1024, "a")
    const pump = () => {
      while (!answered && !request.destroyed && sent < options.streamBytes!) {
        sent += chunk.length
        if (!request.write(chunk)) return void request.once("drain", pump)
      }
      if (!answered && !request.destroyed) request.end()
    }
    pump()
    return Effect.sync(() => request.destroy())
  })

const keyOf = (agent: Agent.AgentOf<any>, threadId: string) =>
  Effect.map(agent.thread(threadId), (thread) => {
    const { pending, state } = Option.getOrThrow(thread)
    return Wire.interruptKey(Option.getOrThrow(pending), state.messages.length)
  })

/** The key of the approval wait a thread is in. */
const waitKeyOf = (agent: Agent.AgentOf<any>, threadId: string) =>
  Effect.map(agent.thread(threadId), (thread) => Option.getOrThrow(Option.getOrThrow(thread).pending).key)

/** The page's approval of the script's read of notes.txt, bound to that call and its wait. */
const approval = (key: string, waitKey: string) =>
  JSON.stringify({
    key,
    value: [{
      type: "approve",
      callId: "call_read",
      waitKey,
      fingerprint: HumanInTheLoop.fingerprintOf("read_file", { path: "notes.txt" })
    }]
  })

const megabyte = 1024 * 1024

describe("Inspector request guard", () => {
  it.scopedLive("refuses a Host that names another machine (DNS rebinding) with 421, and no run changes", () =>
    Effect.gen(function*() {
      const { agent, inspector, reads, token } = yield* setup(approvalScript, {
        inspector: { allowedHosts: ["inspector.lan"] }
      })
      yield* agent.run("Read my notes", { threadId: "t1" })
      const key = yield* keyOf(agent, "t1")
      const port = inspector.port
      for (const host of [`evil.example:${port}`, "evil.example", `127.0.0.1.evil.example:${port}`, "a b"]) {
        const page = yield* send(port, `/?token=${token}`, { headers: { host } })
        assert.strictEqual(page.status, 421, `GET with Host "${host}"`)
        assert.include(page.body, "allowedHosts")
        assert.notInclude(page.body, "read_file")
        const resume = yield* send(port, `/api/threads/t1/resume?token=${token}`, {
          method: "POST",
          headers: { host, "content-type": "application/json" },
          body: approval(key, yield* waitKeyOf(agent, "t1"))
        })
        assert.strictEqual(resume.status, 421, `POST with Host "${host}"`)
      }
      for (
        const host of [`127.0.0.1:${port}`, `localhost:${port}`, `LocalHost:${port}`, `[::1]:${port}`, "inspector.lan"]
      ) {
        const page = yield* send(port, `/?token=${token}`, { headers: { host } })
        assert.strictEqual(page.status, 200, `GET with Host "${host}"`)
      }
      assert.deepStrictEqual(yield* reads, [])
      assert.isTrue(Option.isSome(yield* pendingOf(agent, "t1")))
    }))

  it.scopedLive("refuses a decision sent from a foreign Origin with 403; the page's own origin may decide", () =>
    Effect.gen(function*() {
      const { agent, inspector, reads, token } = yield* setup(approvalScript)
      yield* agent.run("Read my notes", { threadId: "t1" })
      const key = yield* keyOf(agent, "t1")
      const port = inspector.port
      const path = `/api/threads/t1/resume?token=${token}`
      for (
        const origin of ["http://evil.example", `http://localhost:${port}`, `http://127.0.0.1:${port + 1}`, "null"]
      ) {
        const resume = yield* send(port, path, {
          method: "POST",
          headers: { host: `127.0.0.1:${port}`, origin, "content-type": "application/json" },
          body: approval(key, yield* waitKeyOf(agent, "t1"))
        })
        assert.strictEqual(resume.status, 403, `Origin "${origin}"`)
        assert.include(resume.body, origin)
      }
      assert.deepStrictEqual(yield* reads, [])
      // reading is not a change: the page loads whatever the origin
      const page = yield* send(port, `/?token=${token}`, { headers: { origin: "http://evil.example" } })
      assert.strictEqual(page.status, 200)
      const own = yield* send(port, path, {
        method: "POST",
        headers: { host: `localhost:${port}`, origin: `http://localhost:${port}`, "content-type": "application/json" },
        body: approval(key, yield* waitKeyOf(agent, "t1"))
      })
      assert.strictEqual(own.status, 202)
      yield* eventually(Effect.map(reads, (all) => all.length === 1), "the approved read")
      assert.deepStrictEqual(yield* reads, ["notes.txt"])
    }))

  it.scopedLive("refuses a body whose Content-Length is over maxBodyBytes with 413, before it is sent", () =>
    Effect.gen(function*() {
      const { agent, inspector, reads, token } = yield* setup(approvalScript)
      yield* agent.run("Read my notes", { threadId: "t1" })
      const answer = yield* send(inspector.port, `/api/threads/t1/resume?token=${token}`, {
        method: "POST",
        headers: { "content-type": "application/json", "content-length": String(200 * megabyte) },
        streamBytes: 200 * megabyte
      })
      assert.strictEqual(answer.status, 413)
      assert.include(answer.body, `at most ${megabyte} bytes`)
      assert.isBelow(answer.sentBefore, 16 * megabyte)
      assert.deepStrictEqual(yield* reads, [])
      assert.isTrue(Option.isSome(yield* pendingOf(agent, "t1")))
    }))

  it.scopedLive("refuses a streamed body once it passes maxBodyBytes with 413, answering before the rest is sent", () =>
    Effect.gen(function*() {
      const { agent, inspector, reads, token } = yield* setup(approvalScript)
      yield* agent.run("Read my notes", { threadId: "t1" })
      const answer = yield* send(inspector.port, `/api/threads/t1/resume?token=${token}`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        streamBytes: 200 * megabyte
      })
      assert.strictEqual(answer.status, 413)
      assert.isAbove(answer.sentBefore, megabyte)
      assert.isBelow(answer.sentBefore, 16 * megabyte)
      assert.deepStrictEqual(yield* reads, [])
      assert.isTrue(Option.isSome(yield* pendingOf(agent, "t1")))
    }))

  it.scopedLive("accepts a decision sent in chunks within maxBodyBytes", () =>
    Effect.gen(function*() {
      const { agent, inspector, reads, token } = yield* setup(approvalScript, { inspector: { maxBodyBytes: 4096 } })
      yield* agent.run("Read my notes", { threadId: "t1" })
      const body = approval(yield* keyOf(agent, "t1"), yield* waitKeyOf(agent, "t1"))
      const refused = yield* send(inspector.port, `/api/threads/t1/resume?token=${token}`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: body + " ".repeat(4097 - body.length)
      })
      assert.strictEqual(refused.status, 413)
      const accepted = yield* send(inspector.port, `/api/threads/t1/resume?token=${token}`, {
        method: "POST",
        headers: { "content-type": "application/json", "transfer-encoding": "chunked" },
        body: body + " ".repeat(4096 - body.length)
      })
      assert.strictEqual(accepted.status, 202)
      yield* eventually(Effect.map(reads, (all) => all.length === 1), "the approved read")
    }))

  it.scopedLive("fails with InspectorError when maxBodyBytes is not a whole number of at least 1", () =>
    Effect.gen(function*() {
      for (const maxBodyBytes of [0, -1, 1.5, Number.NaN]) {
        const error = yield* Effect.flip(setup(approvalScript, { inspector: { maxBodyBytes } }))
        assert.instanceOf(error, Inspector.InspectorError)
        assert.include(error.message, "maxBodyBytes")
      }
    }))

  it.scopedLive("fails with InspectorError when allowedHosts holds something that is not a host name", () =>
    Effect.gen(function*() {
      for (const name of ["inspector.lan:8080", "http://inspector.lan", "a b", ""]) {
        const error = yield* Effect.flip(setup(approvalScript, { inspector: { allowedHosts: ["ok.lan", name] } }))
        assert.instanceOf(error, Inspector.InspectorError)
        assert.include(error.message, `allowedHosts holds "${name}"`)
      }
    }))

  it.prop(
    "a Host is allowed exactly when its name, port aside, is one of the allowed names",
    [FastCheck.domain(), FastCheck.option(FastCheck.integer({ min: 1, max: 65535 }), { nil: undefined })],
    ([name, port]) => {
      const names = Guard.hostNames("127.0.0.1", ["inspector.lan"])
      const header = port === undefined ? name : `${name}:${port}`
      assert.strictEqual(Guard.hostAllowed(header, names), names.has(name.toLowerCase()))
      assert.isTrue(Guard.hostAllowed(port === undefined ? "localhost" : `localhost:${port}`, names))
      assert.isTrue(Guard.hostAllowed(port === undefined ? "[::1]" : `[::1]:${port}`, names))
    }
  )
})
