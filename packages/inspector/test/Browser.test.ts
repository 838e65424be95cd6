import { LanguageModel, Tool, Toolkit } from "@effect/ai"
import { assert, describe, layer } from "@effect/vitest"
import { Agent, Checkpointer } from "@stepwise-agent/core"
import { HumanInTheLoop, SubAgents } from "@stepwise-agent/middleware"
import { ScriptedModel } from "@stepwise-agent/testing"
import { Context, Deferred, Effect, Fiber, Layer, Option, Queue, Schema } from "effect"
import * as fs from "node:fs"
import { fileURLToPath } from "node:url"
import { type Browser, chromium, type LaunchOptions, type Page } from "playwright-core"
import * as Inspector from "../src/Inspector.js"
import { approvalScript, eventually, longScript, pendingOf, setup, todos } from "./fixtures.js"

// The page in a real browser, headless, driven by playwright-core (which downloads nothing): $CHROMIUM_PATH,
// else Debian's chromium when installed, else the Chromium binary the @sparticuz/chromium package ships (a fresh
// machine has no system browser). One browser for the file; each test opens its own pages on its own inspector.
// Screenshots of each state go to test-artifacts/.

const artifacts = fileURLToPath(new URL("../test-artifacts/", import.meta.url))
const debianChromium = "/usr/bin/chromium"
/** Flags for a closed network: without them Chromium keeps calling home and is refused. */
const quiet = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync"
]

const packagedOptions = async (): Promise<LaunchOptions> => {
  const { default: packaged } = await import("@sparticuz/chromium")
  // Without --single-process: in one process, closing a browser context ends the whole browser.
  const args = packaged.args.filter((arg) => arg !== "--single-process")
  return { executablePath: await packaged.executablePath(), args: [...args, ...quiet.slice(1)] }
}

/**
 * $CHROMIUM_PATH when set (its failure fails the file); else Debian's chromium when it is installed and starts,
 * else the packaged one: a system browser that exists but cannot start (a broken install, missing libraries) falls
 * back instead of failing every test.
 */
const launchBrowser = async (): Promise<Browser> => {
  const configured = process.env["CHROMIUM_PATH"]
  if (configured !== undefined) return chromium.launch({ executablePath: configured, args: quiet })
  if (fs.existsSync(debianChromium)) {
    try {
      return await chromium.launch({ executablePath: debianChromium, args: quiet })
    } catch (error) {
      // eslint-disable-next-line no-console -- says which browser the file runs on
      console.warn(`${debianChromium} did not start, using @sparticuz/chromium: ${String(error).split("\n")[0]}`)
    }
  }
  return chromium.launch(await packagedOptions())
}

class BrowserTag extends Context.Tag("test/Browser")<BrowserTag, Browser>() {}

const BrowserLive = Layer.scoped(
  BrowserTag,
  Effect.acquireRelease(
    Effect.promise(async () => {
      fs.mkdirSync(artifacts, { recursive: true })
      return launchBrowser()
    }),
    (browser) => Effect.promise(() => browser.close())
  )
)

/** A page on `url` in a context of its own; fails the test on any script error of the page. */
const open = (url: string) =>
  Effect.gen(function*() {
    const browser = yield* BrowserTag
    const errors: Array<string> = []
    const page = yield* Effect.acquireRelease(
      Effect.promise(async () => {
        const context = await browser.newContext({ viewport: { width: 1440, height: 960 } })
        const page = await context.newPage()
        page.on("pageerror", (error) => errors.push(error.message))
        await page.goto(url)
        await page.waitForSelector("[data-testid=connection][data-state=live]", { timeout: 10_000 })
        return page
      }),
      (page) =>
        Effect.promise(() => page.context().close()).pipe(
          Effect.zipRight(Effect.sync(() => assert.deepStrictEqual(errors, [], "script errors on the page")))
        )
    )
    return page
  })

const on = <A>(f: () => Promise<A>) => Effect.promise(f)
const wait = (page: Page, selector: string, timeout = 10_000) => on(() => page.waitForSelector(selector, { timeout }))
const count = (page: Page, selector: string) => on(() => page.locator(selector).count())
const text = (page: Page, selector: string) => on(() => page.locator(selector).first().innerText())
const shot = (page: Page, name: string) =>
  on(() => page.screenshot({ path: `${artifacts}${name}.png`, fullPage: true }))

/**
 * A parent whose first reply hands each of `paths` to a `cleaner` subagent (task calls `t1`, `t2`, …, run one
 * after another), and the cleaner, whose `remove_file` (call `c_rm`) waits for an approval; `removed` lists
 * the removals that ran.
 */
const cleanup = (paths: ReadonlyArray<string>) =>
  Effect.gen(function*() {
    const Remove = Tool.make("remove_file", { parameters: { path: Schema.String }, success: Schema.String })
    const Tools = Toolkit.make(Remove)
    const removed: Array<string> = []
    const childModel = yield* ScriptedModel.make([
      ...paths.map((path) => ScriptedModel.toolCalls([{ name: "remove_file", params: { path }, id: "c_rm" }])),
      ...paths.map(() => ScriptedModel.text("Done."))
    ])
    const approvals = HumanInTheLoop.middleware({ toolkit: Tools, interruptOn: { remove_file: true } })
    const child = yield* Agent.make({ toolkit: Tools, middleware: [approvals] }).pipe(
      Effect.provideService(LanguageModel.LanguageModel, childModel.model),
      Effect.provide(Tools.toLayer({
        remove_file: ({ path }) => Effect.sync(() => (removed.push(path), `removed ${path}`))
      }))
    )
    const parentModel = yield* ScriptedModel.make([
      ScriptedModel.toolCalls(
        paths.map((path, i) => ({
          name: "task",
          params: { agent: "cleaner", task: `Remove ${path}` },
          id: `t${i + 1}`
        }))
      ),
      ScriptedModel.text("Cleaned up.")
    ])
    const agent = yield* Agent.make({
      middleware: [
        SubAgents.middleware({ agents: { cleaner: { description: "Removes files", agent: child } }, concurrency: 1 })
      ]
    }).pipe(Effect.provideService(LanguageModel.LanguageModel, parentModel.model))
    return { agent, removed }
  })

describe("Inspector in a browser", () => {
  layer(BrowserLive, { timeout: "60 seconds", excludeTestServices: true })((it) => {
    it.scoped("shows the todo list progress live until every item is completed", () =>
      Effect.gen(function*() {
        // Each model turn waits for the test, so the page is seen at every step.
        const gate = yield* Queue.unbounded<void>()
        const turn = (parts: ReturnType<typeof ScriptedModel.text>): ScriptedModel.Turn => () =>
          Effect.as(Queue.take(gate), parts)
        const { agent, inspector } = yield* setup([
          turn(ScriptedModel.toolCalls([
            todos(["Find the notes", "in_progress"], ["Read them", "pending"], ["Summarize", "pending"])
          ], { text: "Planning the work." })),
          turn(ScriptedModel.toolCalls([
            todos(["Find the notes", "completed"], ["Read them", "in_progress"], ["Summarize", "pending"])
          ])),
          turn(ScriptedModel.toolCalls([
            todos(["Find the notes", "completed"], ["Read them", "completed"], ["Summarize", "in_progress"])
          ])),
          turn(ScriptedModel.toolCalls([
            todos(["Find the notes", "completed"], ["Read them", "completed"], ["Summarize", "completed"])
          ])),
          turn(ScriptedModel.text("The notes are summarized."))
        ])
        const page = yield* open(inspector.url)
        const run = yield* Effect.fork(agent.run("Summarize my notes", { threadId: "todos" }))
        const inProgress = "[data-testid=todo][data-status=in_progress]"
        yield* Queue.offer(gate, void 0)
        yield* wait(page, `${inProgress}:has-text("Find the notes")`)
        assert.strictEqual(yield* count(page, "[data-testid=todo][data-status=pending]"), 2)
        yield* wait(page, "[data-testid=model-call][data-status=running]")
        yield* shot(page, "todos-1-planned")
        yield* Queue.offer(gate, void 0)
        yield* wait(page, `${inProgress}:has-text("Read them")`)
        assert.strictEqual(yield* text(page, "[data-testid=todo-count]"), "1/3 done")
        yield* shot(page, "todos-2-in-progress")
        yield* Queue.offerAll(gate, [void 0, void 0, void 0])
        yield* Fiber.join(run)
        yield* wait(page, "[data-testid=thread-status][data-status=completed]")
        assert.strictEqual(yield* count(page, "[data-testid=todo][data-status=completed]"), 3)
        assert.strictEqual(yield* text(page, "[data-testid=todo-count]"), "3/3 done")
        assert.include(yield* text(page, "[data-testid=run-end]"), "The notes are summarized.")
        yield* shot(page, "todos-3-completed")
      }))

    it.scoped("approve: the run finishes and the tool ran", () =>
      Effect.gen(function*() {
        const { agent, inspector, reads } = yield* setup(approvalScript)
        const page = yield* open(inspector.url)
        const first = yield* agent.run("Read my notes and summarize them", { threadId: "notes" })
        assert.strictEqual(first._tag, "Interrupted")
        yield* wait(page, "[data-testid=action][data-tool=read_file] [data-testid=approve]")
        assert.include(yield* text(page, "[data-testid=action-args]"), "notes.txt")
        yield* wait(page, "[data-testid=tool-call][data-tool=write_todos]")
        // the call's entry in the effect ledger: write_todos is idempotent
        assert.strictEqual(
          yield* text(page, "[data-testid=tool-call][data-tool=write_todos] [data-testid=tool-ledger]"),
          "[Idempotent] "
        )
        yield* shot(page, "approval-1-pending")
        yield* on(() => page.click("[data-testid=approve]"))
        yield* wait(page, "[data-testid=thread-status][data-status=completed]")
        assert.deepStrictEqual(yield* reads, ["notes.txt"])
        assert.strictEqual(yield* count(page, "[data-testid=approvals]"), 0)
        assert.strictEqual(yield* count(page, "[data-testid=run]"), 2)
        yield* wait(page, "[data-testid=tool-call][data-tool=read_file]")
        yield* wait(page, "[data-testid=decision]:has-text('approve read_file')")
        yield* wait(page, "[data-testid=message]:has-text('contents of notes.txt')")
        // What context editing did to the requests, with the tokens before and after.
        yield* wait(page, "[data-testid=decision][data-middleware=contextEditing] [data-testid=context-bar]")
        assert.match(
          yield* text(page, "[data-testid=decision][data-middleware=contextEditing]"),
          /cleared \d+ tool results, \d+ tokens reclaimed/
        )
        assert.include(yield* text(page, "[data-testid=token-summary]"), "250 tokens in")
        yield* shot(page, "approval-2-approved")
      }))

    it.scoped("edit with invalid arguments: the error shows and the tool does not run", () =>
      Effect.gen(function*() {
        const { agent, inspector, reads } = yield* setup(approvalScript)
        const page = yield* open(inspector.url)
        yield* agent.run("Read my notes", { threadId: "edit" })
        const waiting = yield* pendingOf(agent, "edit")
        yield* wait(page, "[data-testid=edit]")
        yield* on(() => page.click("[data-testid=edit]"))
        yield* on(() => page.fill("[data-testid=edit-args]", "{ \"path\": "))
        yield* on(() => page.click("[data-testid=send-edit]"))
        assert.include(yield* text(page, "[data-testid=approval-error]"), "not valid JSON")
        yield* on(() => page.fill("[data-testid=edit-args]", "{ \"path\": 42 }"))
        yield* on(() => page.click("[data-testid=send-edit]"))
        yield* wait(page, "[data-testid=approval-error]:has-text('InvalidEdit')")
        assert.include(yield* text(page, "[data-testid=approval-error]"), "call_read")
        yield* shot(page, "edit-1-invalid")
        assert.deepStrictEqual(yield* reads, [])
        assert.deepStrictEqual(yield* pendingOf(agent, "edit"), waiting)
        // The thread still waits: a valid edit goes through.
        yield* on(() => page.click("[data-testid=edit]"))
        yield* on(() => page.fill("[data-testid=edit-args]", "{ \"path\": \"summary.txt\" }"))
        yield* on(() => page.click("[data-testid=send-edit]"))
        yield* wait(page, "[data-testid=thread-status][data-status=completed]")
        assert.deepStrictEqual(yield* reads, ["summary.txt"])
        yield* shot(page, "edit-2-valid")
      }))

    it.scoped("reject with a reason: the reason is in the transcript and the tool does not run", () =>
      Effect.gen(function*() {
        const { agent, inspector, reads } = yield* setup(approvalScript)
        const page = yield* open(inspector.url)
        yield* agent.run("Read my notes", { threadId: "reject" })
        yield* wait(page, "[data-testid=reject]")
        yield* on(() => page.click("[data-testid=reject]"))
        yield* on(() => page.fill("[data-testid=reject-reason]", "The notes are private."))
        yield* on(() => page.click("[data-testid=send-reject]"))
        yield* wait(page, "[data-testid=thread-status][data-status=completed]")
        yield* wait(page, "[data-testid=message][data-role=tool]:has-text('Reason: The notes are private.')")
        assert.deepStrictEqual(yield* reads, [])
        yield* shot(page, "reject-1-rejected")
      }))

    it.scoped("respond: the model gets the answer in place of the tool, which does not run", () =>
      Effect.gen(function*() {
        const { agent, inspector, reads } = yield* setup(approvalScript)
        const page = yield* open(inspector.url)
        yield* agent.run("Read my notes", { threadId: "respond" })
        yield* wait(page, "[data-testid=respond]")
        yield* on(() => page.click("[data-testid=respond]"))
        yield* on(() => page.click("[data-testid=send-respond]"))
        assert.include(yield* text(page, "[data-testid=approval-error]"), "Write the answer first")
        yield* on(() => page.fill("[data-testid=respond-text]", "The notes say: ship on Friday."))
        yield* on(() => page.click("[data-testid=send-respond]"))
        yield* wait(page, "[data-testid=thread-status][data-status=completed]")
        yield* wait(page, "[data-testid=message][data-role=tool]:has-text('The notes say: ship on Friday.')")
        assert.deepStrictEqual(yield* reads, [])
      }))

    it.scoped("two tabs approving the same call: the tool runs once, the second tab is told it was decided", () =>
      Effect.gen(function*() {
        const { agent, inspector, reads } = yield* setup(approvalScript)
        const first = yield* open(inspector.url)
        const second = yield* open(inspector.url)
        yield* agent.run("Read my notes", { threadId: "tabs" })
        yield* wait(first, "[data-testid=approve]")
        yield* wait(second, "[data-testid=approve]")
        // The second tab's decision reaches the server only after the first one's was accepted.
        const accepted = yield* Deferred.make<void>()
        yield* on(() =>
          second.route(
            "**/resume**",
            (route) => Effect.runPromise(Deferred.await(accepted)).then(() => route.continue())
          )
        )
        yield* on(() => second.click("[data-testid=approve]"))
        yield* on(() => first.click("[data-testid=approve]"))
        yield* wait(first, "[data-testid=thread-status][data-status=completed]")
        yield* Deferred.succeed(accepted, void 0)
        yield* wait(second, "[data-testid=approval-notice]:has-text('Already decided')")
        yield* wait(second, "[data-testid=thread-status][data-status=completed]")
        assert.deepStrictEqual(yield* reads, ["notes.txt"])
        yield* shot(second, "tabs-1-already-decided")
      }))

    it.scoped("shows a subagent's run under the task call that started it", () =>
      Effect.gen(function*() {
        const childModel = yield* ScriptedModel.make([ScriptedModel.text("The notes are about Effect.")])
        const child = yield* Agent.make({ systemPrompt: "You read notes." }).pipe(
          Effect.provideService(LanguageModel.LanguageModel, childModel.model)
        )
        const parentModel = yield* ScriptedModel.make([
          ScriptedModel.toolCalls([{ name: "task", params: { agent: "reader", task: "Read the notes" }, id: "t1" }]),
          ScriptedModel.text("Done.")
        ])
        const agent = yield* Agent.make({
          middleware: [SubAgents.middleware({ agents: { reader: { description: "Reads", agent: child } } })]
        }).pipe(Effect.provideService(LanguageModel.LanguageModel, parentModel.model))
        const inspector = yield* Inspector.make(agent)
        const page = yield* open(inspector.url)
        const result = yield* agent.run("What are my notes about?", { threadId: "delegating" })
        assert.strictEqual(result._tag, "Completed")
        yield* wait(page, "[data-testid=tool-call][data-tool=task]")
        const nested = yield* on(() => page.locator("[data-testid=subagent-events]").first().textContent())
        assert.include(nested, "model step 1: \"The notes are about Effect.\"")
        assert.include(nested, "ended: Completed")
        yield* shot(page, "subagent-1-nested")
      }))

    it.scoped("a subagent's approval is answered from the parent's thread, routed down to the child", () =>
      Effect.gen(function*() {
        const { agent, removed } = yield* cleanup(["old.log"])
        const inspector = yield* Inspector.make(agent)
        const page = yield* open(inspector.url)
        const first = yield* agent.run("Free some space", { threadId: "cleanup" })
        assert.strictEqual(first._tag, "Interrupted")
        yield* wait(page, "[data-testid=action][data-call='t1/c_rm'][data-tool=remove_file] [data-testid=approve]")
        assert.include(yield* text(page, "[data-testid=asked-by]"), "cleaner (task call t1)")
        assert.deepStrictEqual(removed, [])
        yield* shot(page, "subagent-approval-1-pending")
        yield* on(() => page.click("[data-testid=approve]"))
        yield* wait(page, "[data-testid=thread-status][data-status=completed]")
        assert.deepStrictEqual(removed, ["old.log"])
        const thread = Option.getOrThrow(yield* agent.thread("cleanup"))
        assert.isTrue(Option.isNone(thread.pending))
        yield* shot(page, "subagent-approval-2-approved")
      }))

    it.scoped("two subagents waiting at once: each is decided, then both decisions go in one resume", () =>
      Effect.gen(function*() {
        const { agent, removed } = yield* cleanup(["a.log", "b.log"])
        const inspector = yield* Inspector.make(agent)
        const page = yield* open(inspector.url)
        assert.strictEqual((yield* agent.run("Free some space", { threadId: "cleanup2" }))._tag, "Interrupted")
        yield* wait(page, "[data-testid=action][data-call='t2/c_rm'] [data-testid=approve]")
        assert.strictEqual(yield* count(page, "[data-testid=asked-by]"), 2)
        yield* on(() => page.click("[data-testid=action][data-call='t1/c_rm'] [data-testid=approve]"))
        yield* on(() => page.click("[data-testid=action][data-call='t2/c_rm'] [data-testid=reject]"))
        yield* on(() => page.click("[data-testid=action][data-call='t2/c_rm'] [data-testid=send-reject]"))
        assert.deepStrictEqual(removed, [])
        yield* on(() => page.click("[data-testid=submit-decisions]"))
        yield* wait(page, "[data-testid=thread-status][data-status=completed]")
        assert.deepStrictEqual(removed, ["a.log"])
      }))

    it.scoped(
      "stays responsive on a 1,000-step run: the timeline draws a window of steps",
      () =>
        Effect.gen(function*() {
          const { agent, inspector } = yield* setup(longScript(1000), { maxSteps: 1001 })
          const page = yield* open(inspector.url)
          const result = yield* agent.run("Tick a thousand times", { threadId: "long" })
          assert.strictEqual(result._tag, "Completed")
          // The page gets the whole run (some 20,000 events) at once.
          yield* wait(page, "[data-testid=run-end][data-status=completed]", 30_000)
          assert.include(yield* text(page, "[data-testid=run]"), "1001 steps")
          const drawn = yield* count(page, "[data-testid=step]")
          assert.isAtMost(drawn, 52)
          assert.isAtMost(yield* on(() => page.locator("*").count()), 5000)
          yield* on(() => page.click("[data-testid=show-earlier]"))
          yield* eventually(Effect.map(count(page, "[data-testid=step]"), (n) => n === drawn + 50), "50 more steps")
          // Another run on another thread while the long one is on the page.
          yield* Effect.fork(agent.run("Read my notes", { threadId: "short" }).pipe(Effect.ignore))
          yield* wait(page, "[data-testid=thread][data-thread=short]")
          yield* on(() => page.click("[data-testid=thread][data-thread=long]"))
          yield* wait(page, "[data-testid=thread-id]:has-text('long')")
          yield* shot(page, "long-1-thousand-steps")
        }),
      60_000
    )

    it.scoped("lists threads stored before it started, pages on, and opens one with its wait", () =>
      Effect.gen(function*() {
        const checkpointer = yield* Checkpointer.makeMemory
        const ReadFile = Tool.make("read_file", { parameters: { path: Schema.String }, success: Schema.String })
        const Tools = Toolkit.make(ReadFile)
        const { model } = yield* ScriptedModel.make([
          ScriptedModel.toolCalls([{ name: "read_file", params: { path: "old.txt" }, id: "c1" }])
        ])
        const approvals = HumanInTheLoop.middleware({ toolkit: Tools, interruptOn: { read_file: true } })
        const agent = yield* Agent.make({ toolkit: Tools, middleware: [approvals] }).pipe(
          Effect.provideService(LanguageModel.LanguageModel, model),
          Effect.provideService(Checkpointer.Checkpointer, checkpointer),
          Effect.provide(Tools.toLayer({ read_file: ({ path }) => Effect.succeed(path) }))
        )
        yield* agent.run("Read old.txt", { threadId: "old" })
        // more threads than a page (50)
        for (let i = 0; i < 50; i++) {
          const threadId = `bulk-${String(i).padStart(2, "0")}`
          yield* checkpointer.save(threadId, { version: 1, threadId, messages: [], slices: {} })
        }
        const inspector = yield* Inspector.make(agent).pipe(
          Effect.provideService(Checkpointer.Checkpointer, checkpointer)
        )
        const page = yield* open(inspector.url)
        yield* wait(page, "[data-testid=stored-thread][data-thread=bulk-00]")
        assert.strictEqual(yield* count(page, "[data-testid=stored-thread]"), 50)
        yield* on(() => page.click("[data-testid=stored-more]"))
        yield* wait(page, "[data-testid=stored-thread][data-thread=old]")
        assert.strictEqual(yield* count(page, "[data-testid=stored-thread]"), 51)
        assert.isTrue(yield* on(() => page.locator("[data-testid=stored-more]").isHidden()))
        yield* on(() => page.click("[data-testid=stored-thread][data-thread=old]"))
        yield* wait(page, "[data-testid=thread-id]:has-text('old')")
        yield* wait(page, "[data-testid=action][data-tool=read_file] [data-testid=approve]")
        yield* wait(page, "[data-testid=message]:has-text('Read old.txt')")
        yield* shot(page, "history-1-stored-thread")
      }))

    it.scoped("forks a stored thread opened from the list at a step with an edited tool result; a decision its fork refuses shows the typed error", () =>
      Effect.gen(function*() {
        const checkpointer = yield* Checkpointer.makeMemory
        const Echo = Tool.make("echo", { parameters: { text: Schema.String }, success: Schema.String })
        const ReadFile = Tool.make("read_file", { parameters: { path: Schema.String }, success: Schema.String })
        const Tools = Toolkit.make(Echo, ReadFile)
        const { model } = yield* ScriptedModel.make([
          ScriptedModel.toolCalls([{ name: "echo", params: { text: "hi" }, id: "e1" }]),
          ScriptedModel.text("Echoed."),
          ScriptedModel.toolCalls([{ name: "read_file", params: { path: "old.txt" }, id: "c1" }]),
          ScriptedModel.text("The echo gave 50.")
        ])
        const approvals = HumanInTheLoop.middleware({ toolkit: Tools, interruptOn: { read_file: true } })
        const agent = yield* Agent.make({ toolkit: Tools, middleware: [approvals] }).pipe(
          Effect.provideService(LanguageModel.LanguageModel, model),
          Effect.provideService(Checkpointer.Checkpointer, checkpointer),
          Effect.provide(
            Tools.toLayer({ echo: ({ text }) => Effect.succeed(text), read_file: ({ path }) => Effect.succeed(path) })
          )
        )
        // stored before the inspector starts: one thread done, one waiting for an approval
        yield* agent.run("Echo hi", { threadId: "done" })
        yield* agent.run("Read old.txt", { threadId: "waits" })
        const before = { done: yield* agent.thread("done"), waits: yield* agent.thread("waits") }
        const inspector = yield* Inspector.make(agent).pipe(
          Effect.provideService(Checkpointer.Checkpointer, checkpointer)
        )
        const page = yield* open(inspector.url)

        yield* wait(page, "[data-testid=stored-thread][data-thread=done]")
        yield* on(() => page.click("[data-testid=stored-thread][data-thread=done]"))
        yield* wait(page, "[data-testid=stored-fork]")
        // its steps are its replies: 0 to 2; before step 1 comes the echo's result
        assert.strictEqual(yield* on(() => page.inputValue("[data-testid=stored-fork-at]")), "2")
        yield* on(() => page.fill("[data-testid=stored-fork-at]", "1"))
        yield* on(() => page.dispatchEvent("[data-testid=stored-fork-at]", "change"))
        yield* on(() => page.selectOption("[data-testid=stored-fork-edit]", "toolResult"))
        yield* wait(page, "[data-testid=stored-fork-result]")
        assert.strictEqual(yield* on(() => page.inputValue("[data-testid=stored-fork-call]")), "e1")
        assert.strictEqual(yield* on(() => page.inputValue("[data-testid=stored-fork-result]")), "\"hi\"")
        yield* on(() => page.fill("[data-testid=stored-fork-result]", "50"))
        yield* on(() => page.fill("[data-testid=stored-fork-to]", "done-fork"))
        yield* shot(page, "stored-fork-1-form")
        yield* on(() => page.click("[data-testid=stored-fork-submit]"))
        yield* wait(page, "[data-testid=thread-id]:has-text('done-fork')")
        yield* wait(page, "[data-testid=message]:has-text('The echo gave 50.')")
        yield* shot(page, "stored-fork-2-forked")
        const forked = Option.getOrThrow(yield* agent.thread("done-fork")).state.messages
        assert.deepStrictEqual(forked.map((message: any) => message.role), ["user", "assistant", "tool", "assistant"])
        assert.strictEqual((forked[2] as any).content[0].result, 50)

        // the waiting thread: a decision made for its own wait is refused by the fork's, typed, and nothing is written
        yield* on(() => page.click("[data-testid=stored-thread][data-thread=waits]"))
        yield* wait(page, "[data-testid=thread-id]:has-text('waits')")
        yield* on(() =>
          page.waitForSelector("[data-testid=stored-fork] option[value=decision]", {
            state: "attached",
            timeout: 10_000
          })
        )
        yield* on(() => page.selectOption("[data-testid=stored-fork-edit]", "decision"))
        const request = Schema.decodeUnknownSync(HumanInTheLoop.ApprovalRequest)(
          Option.getOrThrow(Option.getOrThrow(before.waits).pending).value
        )
        yield* wait(page, "[data-testid=stored-fork-decision]")
        yield* on(() =>
          page.fill("[data-testid=stored-fork-decision]", JSON.stringify(HumanInTheLoop.approveAll(request)))
        )
        yield* on(() => page.fill("[data-testid=stored-fork-to]", "waits-fork"))
        yield* on(() => page.click("[data-testid=stored-fork-submit]"))
        yield* wait(page, "[data-testid=stored-fork-status]:has-text('Stale')")
        yield* shot(page, "stored-fork-3-refused")
        assert.isTrue(Option.isNone(yield* agent.thread("waits-fork")), "nothing written")
        assert.deepStrictEqual(yield* agent.thread("done"), before.done, "the sources are untouched")
        assert.deepStrictEqual(yield* agent.thread("waits"), before.waits)
      }))

    it.scoped("starts a run from the page, then shows a model call's request and the state then", () =>
      Effect.gen(function*() {
        const { agent, inspector } = yield* setup([ScriptedModel.text("Hello from the page.")])
        const page = yield* open(inspector.url)
        yield* on(() => page.fill("[data-testid=new-run-thread]", "fresh"))
        yield* on(() => page.fill("[data-testid=new-run-message]", "Say hello"))
        yield* on(() => page.click("[data-testid=new-run-send]"))
        yield* wait(page, "[data-testid=thread-status][data-status=completed]")
        assert.include(yield* text(page, "[data-testid=new-run-status]"), "Started a run on fresh")
        assert.isTrue(Option.isSome(yield* agent.thread("fresh")))
        yield* on(() => page.click("[data-testid=load-request]"))
        yield* wait(page, "[data-testid=model-request] details")
        yield* on(() => page.click("[data-testid=model-request] details summary"))
        assert.include(yield* text(page, "[data-testid=raw-request]"), "You read files.")
        assert.include(yield* text(page, "[data-testid=raw-request]"), "Say hello")
        yield* shot(page, "history-2-request")
      }))

    it.scoped("forks from a model call's step with an edited tool result; the fork runs live, the source is untouched", () =>
      Effect.gen(function*() {
        const { agent, inspector } = yield* setup([
          ScriptedModel.toolCalls([{ name: "tick", params: {}, id: "tick_0" }]),
          ScriptedModel.text("Ticked once."),
          ScriptedModel.text("The tick gave 50.")
        ])
        const page = yield* open(inspector.url)
        yield* agent.run("Tick once", { threadId: "src" })
        const before = yield* agent.thread("src")
        yield* wait(page, "[data-testid=thread-status][data-status=completed]")
        // the second model call, step 1 of the thread: the state then, and the fork from there
        yield* on(() => page.locator("[data-testid=load-request]").nth(1).click())
        yield* on(() => page.waitForSelector("[data-testid=fork][data-at='1']", { state: "attached", timeout: 10_000 }))
        yield* on(() => page.click("[data-testid=model-request] details:has([data-testid=fork]) summary"))
        yield* on(() => page.selectOption("[data-testid=fork-edit]", "toolResult"))
        yield* wait(page, "[data-testid=fork-result]")
        assert.strictEqual(yield* on(() => page.inputValue("[data-testid=fork-call]")), "tick_0")
        assert.strictEqual(yield* on(() => page.inputValue("[data-testid=fork-to]")), "src-fork-1")
        // the result as it was, as JSON: a fork with it unchanged gets it back as it was
        assert.strictEqual(yield* on(() => page.inputValue("[data-testid=fork-result]")), "1")
        yield* on(() => page.fill("[data-testid=fork-result]", "50"))
        // a target that exists: the typed error shows, nothing runs
        yield* on(() => page.fill("[data-testid=fork-to]", "src"))
        yield* on(() => page.click("[data-testid=fork-submit]"))
        yield* wait(page, "[data-testid=fork-status]:has-text('ThreadExists')")
        yield* shot(page, "fork-1-refused")
        yield* on(() => page.fill("[data-testid=fork-to]", "src-fork-1"))
        yield* on(() => page.click("[data-testid=fork-submit]"))
        yield* wait(page, "[data-testid=thread-id]:has-text('src-fork-1')")
        yield* wait(page, "[data-testid=thread-status][data-status=completed]")
        yield* wait(page, "[data-testid=message]:has-text('The tick gave 50.')")
        yield* shot(page, "fork-2-forked")
        const forked = Option.getOrThrow(yield* agent.thread("src-fork-1")).state.messages
        assert.deepStrictEqual(forked.map((message: any) => message.role), ["user", "assistant", "tool", "assistant"])
        assert.strictEqual((forked[2] as any).content[0].result, 50)
        assert.deepStrictEqual(yield* agent.thread("src"), before, "the source thread is untouched")
      }))

    it.scoped("forks from the first model call with a message taken in first; a tool result shows as JSON to edit", () =>
      Effect.gen(function*() {
        const Echo = Tool.make("echo", { parameters: { text: Schema.String }, success: Schema.String })
        const Tools = Toolkit.make(Echo)
        const { model } = yield* ScriptedModel.make([
          ScriptedModel.toolCalls([{ name: "echo", params: { text: "Plan" }, id: "c1" }]),
          ScriptedModel.text("Planned."),
          ScriptedModel.text("Stopped as asked.")
        ])
        const agent = yield* Agent.make({ toolkit: Tools }).pipe(
          Effect.provideService(LanguageModel.LanguageModel, model),
          Effect.provide(Tools.toLayer({ echo: ({ text }) => Effect.succeed(text) }))
        )
        const inspector = yield* Inspector.make(agent)
        const page = yield* open(inspector.url)
        yield* agent.run("Plan something", { threadId: "plan" })
        yield* wait(page, "[data-testid=thread-status][data-status=completed]")
        // step 1: the echo's result, a string, is offered as JSON (quoted), so that it parses back as it was
        yield* on(() => page.locator("[data-testid=load-request]").nth(1).click())
        yield* on(() => page.waitForSelector("[data-testid=fork][data-at='1']", { state: "attached" }))
        yield* on(() => page.click("[data-testid=model-request] details:has([data-testid=fork]) summary"))
        yield* on(() => page.selectOption("[data-testid=fork-edit]", "toolResult"))
        yield* wait(page, "[data-testid=fork-result]")
        assert.strictEqual(yield* on(() => page.inputValue("[data-testid=fork-result]")), "\"Plan\"")
        // step 0: before the first reply, with a message
        yield* on(() => page.locator("[data-testid=load-request]").first().click())
        yield* on(() => page.waitForSelector("[data-testid=fork][data-at='0']", { state: "attached" }))
        yield* on(() =>
          page.locator("[data-testid=model-request] details:has([data-testid=fork][data-at='0']) summary").click()
        )
        yield* on(() => page.selectOption("[data-testid=fork][data-at='0'] [data-testid=fork-edit]", "message"))
        yield* wait(page, "[data-testid=fork-message]")
        yield* on(() => page.fill("[data-testid=fork-message]", "Stop here."))
        yield* on(() => page.click("[data-testid=fork][data-at='0'] [data-testid=fork-submit]"))
        yield* wait(page, "[data-testid=thread-id]:has-text('plan-fork-0')")
        yield* wait(page, "[data-testid=message]:has-text('Stopped as asked.')")
        const forked = Option.getOrThrow(yield* agent.thread("plan-fork-0")).state.messages
        assert.deepStrictEqual(forked.map((message: any) => message.role), ["user", "user", "assistant"])
      }))
  })
})
