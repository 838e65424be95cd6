/* global document, location, EventSource, fetch, setTimeout, URLSearchParams, Node */
// The agent inspector's page. Plain DOM, no framework: the server sends a log of events (server-sent events);
// this script folds them into threads and runs and draws the selected one. Text from the agent only ever
// reaches the page as text nodes.
"use strict"

const token = new URLSearchParams(location.search).get("token") ?? ""
/** Step groups drawn per run at first; "Show earlier" adds as many. Keeps long runs responsive. */
const windowSize = 50
/** Messages fetched per transcript page. */
const transcriptPage = 100

// -----------------------------------------------------------------------------
// the model
// -----------------------------------------------------------------------------

const model = {
  threads: new Map(),
  runs: new Map(),
  order: [],
  selected: null,
  selectedRun: null,
  pinnedThread: false,
  connection: "connecting",
  version: 0
}

const approvalUi = new Map()
/** Per thread: a refusal to keep showing after its wait is gone ("already decided"). */
const notices = new Map()
const openKeys = new Set()
let transcript = null
let transcriptWanted = null

function resetModel() {
  model.threads = new Map()
  model.runs = new Map()
  model.order = []
  model.selectedRun = null
  approvalUi.clear()
  notices.clear()
  transcript = null
  transcriptWanted = null
}

function threadOf(id) {
  let thread = model.threads.get(id)
  if (thread === undefined) {
    thread = { id, info: null, runs: [], todos: null, todosSeq: 0, lastSeq: 0, failure: null }
    model.threads.set(id, thread)
    model.order.push(id)
  }
  return thread
}

function runOf(runId, threadId, at) {
  let run = model.runs.get(runId)
  if (run === undefined) {
    const thread = threadOf(threadId)
    run = {
      id: runId,
      threadId,
      number: thread.runs.length + 1,
      resumed: false,
      status: "running",
      startedAt: at,
      endedAt: null,
      steps: 0,
      groups: [],
      pendingItems: [],
      pendingHooks: [],
      current: null,
      tools: new Map(),
      result: null,
      failure: null,
      tokens: [],
      window: windowSize,
      version: 0
    }
    thread.runs.push(runId)
    model.runs.set(runId, run)
  }
  return run
}

function isBefore(hook) {
  return hook === "beforeAgent" || hook === "beforeModel"
}

function touch(group) {
  group.version++
}

function place(run, hook, item) {
  if (run.current === null || isBefore(hook)) {
    run.pendingItems.push(item)
    return
  }
  const group = run.current
  // What a middleware did to the request of a model call goes before the call.
  const call = hook === "wrapModelCall" && group.model?.status === "running" ? group.items.indexOf(group.model) : -1
  if (call >= 0) group.items.splice(call, 0, item)
  else group.items.push(item)
  touch(group)
}

function placeHook(run, hook, item) {
  if (run.current === null || isBefore(hook)) {
    run.pendingHooks.push(item)
  } else {
    run.current.hooks.push(item)
    touch(run.current)
  }
}

function flush(run, title) {
  if (run.pendingItems.length === 0 && run.pendingHooks.length === 0) return
  const group = {
    key: `${run.id}:${run.groups.length}`,
    title,
    items: run.pendingItems,
    hooks: run.pendingHooks,
    version: 0
  }
  run.pendingItems = []
  run.pendingHooks = []
  run.groups.push(group)
}

function isTodoList(value) {
  return Array.isArray(value) &&
    value.every((todo) => todo !== null && typeof todo === "object" && typeof todo.content === "string")
}

function applyThread(info, seq) {
  const thread = threadOf(info.threadId)
  thread.info = info
  thread.lastSeq = seq
  if (isTodoList(info.slices.todos) && seq > thread.todosSeq) {
    thread.todos = info.slices.todos
    thread.todosSeq = seq
  }
}

function apply(entry) {
  if (entry.type === "thread") {
    applyThread(entry.thread, entry.seq)
    return
  }
  const { at, event, runId, threadId } = entry
  const thread = threadOf(threadId)
  thread.lastSeq = entry.seq
  const run = runOf(runId, threadId, at)
  run.version++
  switch (event._tag) {
    case "RunStarted": {
      run.resumed = event.resumed
      break
    }
    case "ModelCallStarted": {
      const item = {
        kind: "model",
        runId: run.id,
        step: event.step,
        messageCount: event.messageCount,
        toolNames: event.toolNames,
        startedAt: at,
        text: "",
        status: "running",
        attempts: []
      }
      const group = {
        key: `${run.id}:${run.groups.length}`,
        title: `Step ${event.step + 1}`,
        items: [...run.pendingItems, item],
        hooks: run.pendingHooks,
        model: item,
        version: 0
      }
      run.pendingItems = []
      run.pendingHooks = []
      run.groups.push(group)
      run.current = group
      break
    }
    case "ModelRequestSent": {
      // the request itself is fetched when asked for (the inspector keeps the latest ones)
      if (run.current?.model !== undefined) {
        Object.assign(run.current.model, { sent: { messageCount: event.messageCount, toolChoice: event.toolChoice } })
        touch(run.current)
      }
      break
    }
    case "TextDelta": {
      if (run.current?.model !== undefined) {
        run.current.model.text += event.delta
        touch(run.current)
      }
      break
    }
    case "ModelAttemptFailed": {
      if (run.current?.model !== undefined) {
        run.current.model.attempts.push({ error: event.error, message: event.message })
        if (event.discardedText) run.current.model.text = ""
        touch(run.current)
      }
      break
    }
    case "ModelResponded": {
      const item = run.current?.model
      if (item !== undefined) {
        Object.assign(item, {
          status: "done",
          message: event.message,
          usage: event.usage,
          finishReason: event.finishReason,
          durationMillis: event.durationMillis
        })
        touch(run.current)
      }
      run.steps = Math.max(run.steps, event.step + 1)
      run.tokens.push({
        step: event.step,
        input: event.usage?.inputTokens ?? null,
        output: event.usage?.outputTokens ?? null
      })
      break
    }
    case "ToolCallStarted": {
      const item = { kind: "tool", call: event.call, ledger: event.ledger, status: "running", startedAt: at }
      run.tools.set(event.call.id, item)
      place(run, "wrapToolCall", item)
      break
    }
    case "ToolCallCompleted": {
      const item = run.tools.get(event.result.id)
      if (item !== undefined) {
        Object.assign(item, { status: "done", result: event.result, durationMillis: event.durationMillis })
        if (run.current !== null) touch(run.current)
      }
      break
    }
    case "SubAgentEvent": {
      // a subagent's run, summarized under the task call that started it (a grandchild's, under that)
      const item = run.tools.get(event.callId)
      const line = subAgentLine(event)
      if (item !== undefined && line !== null) {
        item.subagent ??= { agent: event.agent, threadId: event.threadId, lines: [] }
        item.subagent.lines.push(line)
        if (run.current !== null) touch(run.current)
      }
      break
    }
    case "MiddlewareDecision": {
      place(run, event.hook, {
        kind: "decision",
        middleware: event.middleware,
        hook: event.hook,
        decision: event.decision,
        data: event.data
      })
      if (event.data !== null && typeof event.data === "object" && isTodoList(event.data.todos)) {
        if (entry.seq > thread.todosSeq) {
          thread.todos = event.data.todos
          thread.todosSeq = entry.seq
        }
      }
      break
    }
    case "StateUpdated": {
      place(run, event.hook, {
        kind: "state",
        middleware: event.middleware,
        hook: event.hook,
        keys: event.keys,
        messagesReplaced: event.messagesReplaced
      })
      break
    }
    case "MessageReceived": {
      // joined the thread before the step's beforeModel hooks (steer), or as the run's input
      place(run, "beforeModel", { kind: "message", mode: event.mode, messages: event.messages })
      break
    }
    case "HookCompleted": {
      placeHook(run, event.hook, {
        middleware: event.middleware,
        hook: event.hook,
        durationMillis: event.durationMillis
      })
      break
    }
    case "RunEnded": {
      run.status = event.result._tag === "Completed" ? "completed" : "interrupted"
      run.result = event.result
      run.endedAt = at
      flush(run, "End of the run")
      break
    }
    case "RunFailed": {
      run.status = "failed"
      run.failure = { error: event.error, message: event.message }
      run.endedAt = at
      flush(run, "End of the run")
      break
    }
    default: {
      place(run, "", { kind: "other", event })
    }
  }
}

/** One line for a subagent's event (nested ones prefixed with their agent), or null for the noisy ones. */
function subAgentLine(wrapped) {
  const event = wrapped.event
  switch (event._tag) {
    case "SubAgentEvent": {
      const line = subAgentLine(event)
      return line === null ? null : `${event.agent} › ${line}`
    }
    case "ModelResponded": {
      const parts = event.message?.content ?? []
      const text = parts.filter((part) => part.type === "text").map((part) => part.text).join("")
      const calls = parts.filter((part) => part.type === "tool-call").length
      return `model step ${event.step + 1}: ${inline(text, 100)}${calls > 0 ? ` (${calls} tool call(s))` : ""}`
    }
    case "ToolCallStarted":
      return `⚙ ${event.call.name} ${inline(event.call.params, 80)}${
        event.ledger === undefined ? "" : ` [${event.ledger.effect}]`
      }`
    case "ToolCallCompleted":
      return `${event.result.isFailure ? "✗" : "←"} ${event.result.name}: ${inline(event.result.result, 100)}`
    case "MiddlewareDecision":
      return `[${event.middleware}] ${event.decision}`
    case "RunEnded":
      return `ended: ${event.result._tag}`
    case "RunFailed":
      return `failed: ${event.error}: ${event.message}`
    default:
      return null
  }
}

// -----------------------------------------------------------------------------
// helpers
// -----------------------------------------------------------------------------

function h(tag, props, ...children) {
  const element = document.createElement(tag)
  if (props !== null && props !== undefined) {
    for (const [key, value] of Object.entries(props)) {
      if (value === undefined || value === null || value === false) continue
      if (key === "class") element.className = value
      else if (key === "text") element.textContent = value
      else if (key.startsWith("on")) element.addEventListener(key.slice(2), value)
      else element.setAttribute(key, value === true ? "" : String(value))
    }
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue
    element.append(child instanceof Node ? child : String(child))
  }
  return element
}

function json(value, max = 4000) {
  let text
  try {
    text = typeof value === "string" ? value : JSON.stringify(value, null, 2)
  } catch {
    text = String(value)
  }
  if (text === undefined) text = "undefined"
  return text.length > max ? `${text.slice(0, max)}… (${text.length - max} more characters)` : text
}

function inline(value, max = 120) {
  let text
  try {
    text = JSON.stringify(value)
  } catch {
    text = String(value)
  }
  if (text === undefined) text = ""
  return text.length > max ? `${text.slice(0, max - 1)}…` : text
}

function number(value) {
  return typeof value === "number" ? value.toLocaleString("en-US") : "?"
}

function messages(count) {
  return `${number(count)} message${count === 1 ? "" : "s"}`
}

function ms(value) {
  if (typeof value !== "number") return ""
  return value >= 1000 ? `${(value / 1000).toFixed(2)} s` : `${value < 10 ? value.toFixed(1) : Math.round(value)} ms`
}

function details(key, summary, ...body) {
  const element = h("details", { "data-key": key, open: openKeys.has(key) }, h("summary", null, summary), ...body)
  element.addEventListener("toggle", () => {
    if (element.open) openKeys.add(key)
    else openKeys.delete(key)
  })
  return element
}

function api(path, init) {
  return fetch(path, {
    ...init,
    headers: { "content-type": "application/json", "x-inspector-token": token }
  })
}

function threadStatus(thread) {
  const last = model.runs.get(thread.runs[thread.runs.length - 1])
  if (thread.info?.running || last?.status === "running") return "running"
  if (thread.info?.pending) return "waiting"
  if (last?.status === "failed") return "failed"
  if (last?.status === "completed") return "completed"
  if (last?.status === "interrupted") return "interrupted"
  return "idle"
}

const statusText = {
  running: "running",
  waiting: "waiting for a decision",
  failed: "failed",
  completed: "completed",
  interrupted: "interrupted",
  idle: "idle"
}

// -----------------------------------------------------------------------------
// drawing
// -----------------------------------------------------------------------------

let scheduled = false

function schedule() {
  if (scheduled) return
  scheduled = true
  setTimeout(() => {
    scheduled = false
    render()
  }, 30)
}

function render() {
  const connection = document.getElementById("connection")
  connection.dataset.state = model.connection
  connection.textContent = model.connection === "stopped" ? "inspector stopped" : model.connection
  if (!model.pinnedThread) {
    let latest = null
    for (const thread of model.threads.values()) {
      if (latest === null || thread.lastSeq > latest.lastSeq) latest = thread
    }
    if (latest !== null && latest.id !== model.selected) {
      model.selected = latest.id
      model.selectedRun = null
    }
  }
  renderThreads()
  renderMain()
}

function renderThreads() {
  const list = document.getElementById("threads")
  document.getElementById("no-threads").hidden = model.order.length > 0
  list.replaceChildren(...model.order.map((id) => {
    const thread = model.threads.get(id)
    const status = threadStatus(thread)
    return h(
      "li",
      null,
      h(
        "button",
        {
          "data-testid": "thread",
          "data-thread": id,
          "aria-current": id === model.selected ? "true" : "false",
          title: id,
          onclick: () => {
            model.selected = id
            model.selectedRun = null
            model.pinnedThread = true
            schedule()
          }
        },
        h("span", { class: "name" }, id),
        h("span", { class: "badge", "data-status": status }, statusText[status])
      )
    )
  }))
}

let mainKey = null
const mainParts = {}

function renderMain() {
  const main = document.getElementById("main")
  const thread = model.selected === null ? undefined : model.threads.get(model.selected)
  if (thread === undefined) {
    if (mainKey !== null) {
      main.replaceChildren()
      mainKey = null
    }
    return
  }
  if (mainKey !== thread.id) {
    mainKey = thread.id
    mainParts.head = h("div", { class: "thread-head" })
    mainParts.approvals = h("div")
    mainParts.compose = renderCompose(thread.id)
    mainParts.runs = h("div", { class: "runs", "data-testid": "runs" })
    mainParts.timeline = h("div", { class: "timeline", "data-testid": "timeline" })
    mainParts.todos = h("section", { class: "panel", "data-testid": "todo-panel" })
    mainParts.context = h("section", { class: "panel", "data-testid": "context-panel" })
    mainParts.transcript = h("section", { class: "panel", "data-testid": "transcript-panel" })
    mainParts.storedFork = h("section", { class: "panel", "data-testid": "stored-fork-panel", hidden: true })
    mainParts.approvalsKey = null
    mainParts.timelineKey = null
    main.replaceChildren(
      mainParts.head,
      mainParts.approvals,
      mainParts.compose,
      h(
        "div",
        { class: "columns" },
        h("section", { class: "panel" }, h("h3", null, "Runs"), mainParts.runs, mainParts.timeline),
        h("div", null, mainParts.storedFork, mainParts.todos, mainParts.context, mainParts.transcript)
      )
    )
  }
  const status = threadStatus(thread)
  mainParts.head.replaceChildren(
    h("h2", { "data-testid": "thread-id" }, thread.id),
    h("span", { class: "badge", "data-status": status, "data-testid": "thread-status" }, statusText[status]),
    thread.info === null ? null : h("span", { class: "muted" }, messages(thread.info.messageCount))
  )
  renderApprovals(thread)
  const run = model.runs.get(model.selectedRun ?? thread.runs[thread.runs.length - 1])
  renderRuns(thread, run)
  renderTimeline(run)
  renderTodos(thread)
  renderContext(run)
  renderTranscript(thread)
  renderStoredFork(thread)
}

// The message box: sends to the thread (`Agent.send`); a running run takes a steer message in
// before its next model call, a queued one runs after it, and an idle thread starts a run.
function renderCompose(threadId) {
  const input = h("textarea", { rows: 2, placeholder: "Message to the agent…", "data-testid": "compose-message" })
  const mode = h(
    "select",
    { "data-testid": "compose-mode", title: "steer: before the running run's next model call; queue: a run after it" },
    h("option", { value: "steer" }, "steer"),
    h("option", { value: "queue" }, "queue")
  )
  const status = h("span", { class: "meta", "data-testid": "compose-status" })
  const send = async () => {
    if (input.value.trim() === "") return
    status.textContent = "Sending…"
    try {
      const response = await api(`/api/threads/${encodeURIComponent(threadId)}/send`, {
        method: "POST",
        body: JSON.stringify({ message: input.value, mode: mode.value })
      })
      const body = await response.json()
      if (response.ok) {
        input.value = ""
        status.textContent = {
          steered: "Sent: it joins the running run before its next model call.",
          queued: "Queued: it runs after the running run.",
          started: "Sent: a run started.",
          held: "Held: it waits for the decision the thread waits for."
        }[body.delivery] ?? body.delivery
      } else {
        status.textContent = `Not sent (${body.error}): ${body.message}`
      }
    } catch (error) {
      status.textContent = `Not sent: ${error}`
    }
  }
  return h(
    "section",
    { class: "panel compose", "data-testid": "compose" },
    input,
    h(
      "div",
      null,
      mode,
      " ",
      h("button", { class: "primary", "data-testid": "compose-send", onclick: send }, "Send"),
      " ",
      status
    )
  )
}

function renderRuns(thread, selected) {
  mainParts.runs.replaceChildren(...thread.runs.map((runId) => {
    const run = model.runs.get(runId)
    return h(
      "button",
      {
        "data-testid": "run",
        "data-status": run.status,
        "aria-current": run === selected ? "true" : "false",
        onclick: () => {
          model.selectedRun = runId
          schedule()
        }
      },
      `Run ${run.number}${run.resumed ? " (resume)" : ""} · `,
      h("span", { class: "badge", "data-status": run.status }, run.status),
      ` · ${run.steps} step${run.steps === 1 ? "" : "s"}`
    )
  }))
}

// -- timeline -------------------------------------------------------------------

const groupCache = new WeakMap()

function renderTimeline(run) {
  const container = mainParts.timeline
  if (run === undefined) {
    container.replaceChildren(h("p", { class: "muted" }, "No run selected."))
    return
  }
  const key = `${run.id}:${run.version}:${run.window}`
  if (mainParts.timelineKey === key) return
  const following = mainParts.timelineKey === null || mainParts.timelineKey.split(":")[0] !== run.id ||
    container.scrollTop + container.clientHeight >= container.scrollHeight - 40
  mainParts.timelineKey = key
  const hidden = Math.max(0, run.groups.length - run.window)
  const children = []
  if (hidden > 0) {
    children.push(
      h("button", {
        "data-testid": "show-earlier",
        onclick: () => {
          run.window += windowSize
          run.version++
          schedule()
        }
      }, `Show ${Math.min(windowSize, hidden)} earlier steps (${hidden} hidden)`)
    )
  }
  for (const group of run.groups.slice(hidden)) {
    const cached = groupCache.get(group)
    if (cached !== undefined && cached.version === group.version) {
      children.push(cached.element)
    } else {
      const element = renderGroup(group)
      groupCache.set(group, { version: group.version, element })
      children.push(element)
    }
  }
  const open = { key: `${run.id}:open`, title: null, items: run.pendingItems, hooks: run.pendingHooks }
  if (open.items.length > 0 || open.hooks.length > 0) children.push(renderGroup(open))
  children.push(renderEnd(run))
  container.replaceChildren(...children)
  if (following) container.scrollTop = container.scrollHeight
}

function renderEnd(run) {
  switch (run.status) {
    case "running":
      return h("div", { class: "end muted", "data-status": "running" }, "Running…")
    case "completed":
      return h(
        "div",
        { class: "end", "data-status": "completed", "data-testid": "run-end" },
        `Completed after ${run.result.steps} model calls, ${number(run.result.usage?.totalTokens)} tokens`,
        run.result.text ? h("pre", null, run.result.text) : null
      )
    case "interrupted":
      return h(
        "div",
        { class: "end", "data-status": "interrupted", "data-testid": "run-end" },
        `Interrupted: waiting for a decision (middleware "${run.result.interrupt.middleware}")`
      )
    case "failed":
      return h(
        "div",
        { class: "end", "data-status": "failed", "data-testid": "run-end" },
        `Failed: ${run.failure.error}`,
        h("pre", null, run.failure.message)
      )
  }
  return null
}

function renderGroup(group) {
  const section = h("section", { class: "step", "data-testid": "step" })
  if (group.title !== null) section.append(h("div", { class: "title" }, group.title))
  for (const item of group.items) section.append(renderItem(group, item))
  if (group.hooks.length > 0) {
    const total = group.hooks.reduce((sum, hook) => sum + hook.durationMillis, 0)
    section.append(
      h(
        "div",
        { class: "hooks" },
        details(
          `${group.key}:hooks`,
          `${group.hooks.length} hook${group.hooks.length === 1 ? "" : "s"} (${ms(total)} in all)`,
          h(
            "ul",
            null,
            group.hooks.map((hook) => h("li", null, `${hook.middleware}.${hook.hook}: ${ms(hook.durationMillis)}`))
          )
        )
      )
    )
  }
  return section
}

/** The parts of an encoded message (its content may be a plain string). */
function renderParts(content) {
  const parts = typeof content === "string" ? [{ type: "text", text: content }] : Array.isArray(content) ? content : []
  return parts.map((part) => {
    switch (part.type) {
      case "text":
        return h("pre", null, part.text)
      case "reasoning":
        return h("pre", { class: "muted" }, `(reasoning) ${part.text}`)
      case "tool-call":
        return h("div", null, h("span", { class: "tool name" }, `→ ${part.name}`), ` ${inline(part.params)}`)
      case "tool-result":
        return h(
          "div",
          { class: part.isFailure ? "part-failure" : null },
          h("span", { class: "tool name" }, `← ${part.name}${part.isFailure ? " (failed)" : ""}`),
          h("pre", null, json(part.result))
        )
      default:
        return h("pre", { class: "muted" }, json(part))
    }
  })
}

function sizeBar(bar, value, trigger, scale) {
  bar.querySelector(".fill").style.width = `${Math.min(100, (value / scale) * 100)}%`
  if (trigger !== null && value > trigger) bar.querySelector(".fill").classList.add("over")
  const line = bar.querySelector(".trigger")
  if (line !== null) line.style.left = `${Math.min(100, (trigger / scale) * 100)}%`
  return bar
}

function makeBar(value, trigger, scale) {
  return sizeBar(
    h("div", { class: "bar" }, h("div", { class: "fill" }), trigger === null ? null : h("div", { class: "trigger" })),
    value,
    trigger,
    scale
  )
}

/** A context policy's report (`tokensBefore`, `tokensAfter`, `trigger` in its data) as a bar. */
function contextBar(data) {
  if (data === null || typeof data !== "object" || typeof data.tokensBefore !== "number") return null
  const trigger = typeof data.trigger === "number" ? data.trigger : null
  const after = typeof data.tokensAfter === "number" ? data.tokensAfter : data.tokensBefore
  return h(
    "div",
    { "data-testid": "context-bar" },
    makeBar(after, trigger, Math.max(data.tokensBefore, trigger ?? 0, 1)),
    h(
      "div",
      { class: "meta" },
      `${number(data.tokensBefore)} → ${number(after)} tokens${trigger === null ? "" : ` (trigger ${number(trigger)})`}`
    )
  )
}

function renderItem(group, item) {
  switch (item.kind) {
    case "model": {
      const usage = item.usage
      const meta = item.status === "running"
        ? `model call · ${messages(item.messageCount)} in · running…`
        : `model call · ${ms(item.durationMillis)} · ${number(usage?.inputTokens)} tokens in / ${
          number(usage?.outputTokens)
        } out · finish: ${item.finishReason} · ${messages(item.messageCount)} in`
      const element = h("div", { class: "model", "data-testid": "model-call", "data-status": item.status })
      element.append(h("div", { class: "meta" }, meta))
      for (const attempt of item.attempts) {
        element.append(h("div", { class: "attempt" }, `attempt failed (${attempt.error}): ${attempt.message}`))
      }
      if (item.status === "running") {
        if (item.text !== "") element.append(h("pre", { class: "live", "data-testid": "live-text" }, item.text))
      } else if (item.message !== undefined) {
        element.append(...renderParts(item.message.content))
      }
      if (item.toolNames.length > 0) {
        element.append(h("div", { class: "meta" }, `tools offered: ${item.toolNames.join(", ")}`))
      }
      if (item.sent !== undefined) element.append(renderRequest(group, item))
      if (item.message !== undefined) {
        element.append(details(
          `${group.key}:reply`,
          "Reply as stored",
          h("pre", { "data-testid": "raw-reply" }, json(item.message, 100_000))
        ))
      }
      return element
    }
    case "tool": {
      const result = item.result
      const failure = result?.isFailure === true
      const summary = [
        h("span", { class: "name" }, `⚙ ${item.call.name}`),
        ` ${inline(item.call.params, 80)} `,
        // its entry in the effect ledger: what the tool declares it does (absent for a read-only tool)
        item.ledger === undefined
          ? null
          : h("span", { class: "meta", "data-testid": "tool-ledger" }, `[${item.ledger.effect}] `),
        h(
          "span",
          { class: "meta" },
          item.status === "running" ? "running…" : `${failure ? "failed" : "done"} in ${ms(item.durationMillis)}`
        )
      ]
      return h(
        "div",
        { class: "tool", "data-testid": "tool-call", "data-tool": item.call.name, "data-failure": String(failure) },
        details(
          `${group.key}:tool:${item.call.id}`,
          summary,
          h("div", { class: "meta" }, "arguments"),
          h("pre", null, json(item.call.params)),
          item.ledger === undefined ? null : h("div", { class: "meta" }, "ledger entry"),
          item.ledger === undefined ? null : h("pre", { "data-testid": "tool-ledger-entry" }, json(item.ledger)),
          item.subagent === undefined
            ? null
            : h("div", { class: "meta" }, `subagent ${item.subagent.agent} on thread ${item.subagent.threadId}`),
          item.subagent === undefined
            ? null
            : h("pre", { "data-testid": "subagent-events" }, item.subagent.lines.join("\n")),
          result === undefined ? null : h("div", { class: "meta" }, failure ? "failure" : "result"),
          result === undefined ? null : h("pre", null, json(result.result))
        )
      )
    }
    case "message": {
      const text = item.messages.map((message) =>
        typeof message.content === "string"
          ? message.content
          : message.content.filter((part) => part.type === "text").map((part) => part.text).join("")
      ).join("\n")
      return h(
        "div",
        { class: "sent-message", "data-testid": "message-received", "data-mode": item.mode },
        h("span", { class: "meta" }, item.mode === "steer" ? "✉ steered in · " : "✉ sent · "),
        text
      )
    }
    case "decision": {
      const bar = contextBar(item.data)
      return h(
        "div",
        { class: "decision", "data-testid": "decision", "data-middleware": item.middleware },
        h("span", { class: "who" }, `[${item.middleware}.${item.hook}] `),
        item.decision,
        bar,
        item.data === undefined || item.data === null
          ? null
          : details(
            `${group.key}:decision:${item.middleware}:${item.decision}`,
            "data",
            h("pre", null, json(item.data))
          )
      )
    }
    case "state": {
      const what = [
        item.keys.length > 0 ? `updated ${item.keys.join(", ")}` : null,
        item.messagesReplaced ? "replaced the messages" : null
      ].filter((x) => x !== null).join(" and ")
      return h("div", { class: "state" }, h("span", { class: "who" }, `[${item.middleware}.${item.hook}] `), what)
    }
    default:
      return h("pre", { class: "muted" }, json(item.event))
  }
}

// -- todos, context ---------------------------------------------------------------

const marks = { pending: "[ ]", in_progress: "[~]", completed: "[x]" }

function renderTodos(thread) {
  const panel = mainParts.todos
  const todos = thread.todos
  const key = JSON.stringify(todos)
  if (panel.dataset.key === key) return
  panel.dataset.key = key
  if (todos === null || todos.length === 0) {
    panel.replaceChildren(h("h3", null, "Todos"), h("p", { class: "muted" }, "No todo list."))
    return
  }
  const done = todos.filter((todo) => todo.status === "completed").length
  panel.replaceChildren(
    h("h3", null, `Todos `, h("span", { class: "muted", "data-testid": "todo-count" }, `${done}/${todos.length} done`)),
    h(
      "ul",
      { class: "todos" },
      todos.map((todo) =>
        h(
          "li",
          { "data-testid": "todo", "data-status": todo.status },
          h("span", { class: "mark" }, marks[todo.status] ?? "[?]"),
          h("span", { class: "text" }, todo.content)
        )
      )
    )
  )
}

function renderContext(run) {
  const panel = mainParts.context
  const key = run === undefined ? "" : `${run.id}:${run.version}`
  if (panel.dataset.key === key) return
  panel.dataset.key = key
  const children = [h("h3", null, "Context")]
  if (run === undefined || run.tokens.length === 0) {
    children.push(h("p", { class: "muted" }, "No model call yet."))
    panel.replaceChildren(...children)
    return
  }
  const edits = []
  for (const group of run.groups) {
    for (const item of group.items) {
      if (
        item.kind === "decision" && item.data !== null && typeof item.data === "object" &&
        typeof item.data.tokensBefore === "number"
      ) {
        edits.push({ group, item })
      }
    }
  }
  const trigger = edits.reduce(
    (found, { item }) => typeof item.data.trigger === "number" ? item.data.trigger : found,
    null
  )
  const recent = run.tokens.slice(-20)
  const scale = Math.max(trigger ?? 0, ...recent.map((entry) => entry.input ?? 0), 1)
  const last = run.tokens[run.tokens.length - 1]
  children.push(
    h(
      "p",
      { "data-testid": "token-summary" },
      `Last request: ${number(last.input)} tokens in`,
      trigger === null ? "" : ` of the ${number(trigger)}-token trigger`
    )
  )
  const rows = h("div", { class: "tokens" })
  for (const entry of recent) {
    rows.append(
      h(
        "div",
        { class: "row" },
        `step ${entry.step + 1}`,
        makeBar(entry.input ?? 0, trigger, scale),
        number(entry.input)
      )
    )
  }
  children.push(rows)
  for (const { group, item } of edits.slice(-5)) {
    children.push(h("div", { class: "decision" }, `${group.title ?? ""}: [${item.middleware}] ${item.decision}`))
  }
  panel.replaceChildren(...children)
}

// -- transcript -------------------------------------------------------------------

function renderTranscript(thread) {
  const panel = mainParts.transcript
  const count = thread.info?.messageCount ?? 0
  // Fetched again when the thread's message count changes (at the start and end of runs); kept when the
  // inspector is gone.
  const wanted = `${thread.id}:${count}`
  if (transcriptWanted !== wanted && model.connection !== "stopped") {
    transcriptWanted = wanted
    loadTranscript(thread.id)
  }
  const shown = transcript !== null && transcript.threadId === thread.id ? transcript : null
  const key = shown === null ? `none:${count}` : `${shown.version}`
  if (panel.dataset.key === key) return
  panel.dataset.key = key
  const children = [h("h3", null, "Transcript")]
  if (shown === null) {
    children.push(h("p", { class: "muted" }, count === 0 ? "No messages yet." : "Loading…"))
  } else {
    if (shown.offset > 0) {
      children.push(h("button", { onclick: () => loadEarlier() }, `Load earlier messages (${shown.offset} more)`))
    }
    const list = h("div", { class: "transcript", "data-testid": "transcript" })
    for (const message of shown.messages) {
      // what view-mode context policies left out of what the model sees
      const notes = []
      if (message.compaction === "summarized") notes.push("summarized: the model sees the summary")
      if (Array.isArray(message.cleared)) notes.push(`cleared for the model: ${message.cleared.join(", ")}`)
      list.append(
        h(
          "div",
          {
            class: "message",
            "data-role": message.role,
            "data-testid": "message",
            "data-compaction": message.compaction ?? (Array.isArray(message.cleared) ? "cleared" : null)
          },
          h("div", { class: "role" }, message.role),
          notes.length === 0 ? null : h("div", { class: "muted", "data-testid": "compaction" }, notes.join(" · ")),
          renderParts(message.content)
        )
      )
    }
    children.push(list)
  }
  panel.replaceChildren(...children)
}

let transcriptVersion = 0

async function fetchMessages(threadId, end) {
  const query = end === undefined ? "" : `&end=${end}`
  const response = await api(`/api/threads/${encodeURIComponent(threadId)}?limit=${transcriptPage}${query}`)
  if (!response.ok) throw new Error(`HTTP ${response.status}`)
  return response.json()
}

async function loadTranscript(threadId) {
  try {
    const body = await fetchMessages(threadId)
    if (model.selected !== threadId) return
    transcript = { threadId, offset: body.offset, messages: body.messages, version: ++transcriptVersion }
  } catch {
    // The previous transcript stays; the next change of the thread fetches again.
  }
  schedule()
}

async function loadEarlier() {
  if (transcript === null || transcript.offset === 0) return
  const { threadId } = transcript
  try {
    const body = await fetchMessages(threadId, transcript.offset)
    if (transcript === null || transcript.threadId !== threadId) return
    transcript = {
      ...transcript,
      offset: body.offset,
      messages: [...body.messages, ...transcript.messages],
      version: ++transcriptVersion
    }
  } catch {
    // Nothing more to show.
  }
  schedule()
}

// -- a model call's request, and the state then ------------------------------------

/** The request the model got at this step and the state the call saw: fetched when opened, while kept. */
function renderRequest(group, item) {
  const redraw = () => {
    touch(group)
    const run = model.runs.get(item.runId)
    if (run !== undefined) run.version++
    schedule()
  }
  const load = async () => {
    item.request = { loading: true }
    redraw()
    try {
      const response = await api(`/api/runs/${encodeURIComponent(item.runId)}/steps/${item.step}/request`)
      const body = await response.json()
      item.request = response.ok ? { body } : { error: body.message ?? `HTTP ${response.status}` }
    } catch (error) {
      item.request = { error: String(error) }
    }
    redraw()
  }
  const shown = item.request
  const body = shown?.body
  return h(
    "div",
    { class: "request", "data-testid": "model-request" },
    shown === undefined || shown.error !== undefined
      ? h("button", { "data-testid": "load-request", onclick: load }, "Request sent and state then")
      : null,
    shown?.loading === true ? h("span", { class: "meta" }, " Loading…") : null,
    shown?.error === undefined ? null : h("div", { class: "muted", "data-testid": "request-error" }, shown.error),
    body === undefined ? null : details(
      `${group.key}:request`,
      `Request sent: ${messages(body.prompt.length)}, tool choice ${inline(body.toolChoice)}`,
      h("pre", { "data-testid": "raw-request" }, json(body.prompt, 100_000))
    ),
    body === undefined ? null : details(
      `${group.key}:state`,
      `State then: ${messages(body.state.messages.length)}, slices ${
        Object.keys(body.state.slices).join(", ") || "none"
      }`,
      h("div", { class: "meta" }, "slices"),
      h("pre", { "data-testid": "state-slices" }, json(body.state.slices, 100_000)),
      h("div", { class: "meta" }, "messages"),
      h("pre", { "data-testid": "state-messages" }, json(body.state.messages, 100_000))
    ),
    body === undefined ? null : renderFork(group, item, body.state.messages, redraw)
  )
}

// -- a fork from a step -------------------------------------------------------------

/** A value as JSON text to edit (a string result quoted, so that it parses back as the same string). */
function asJson(value) {
  return JSON.stringify(value, null, 2) ?? "null"
}

/** The tool results of encoded messages, the ones a fork may replace: `{ id, name, result, isFailure }`. */
function toolResultsOf(stateMessages) {
  return stateMessages.flatMap((message) =>
    message.role === "tool" && Array.isArray(message.content)
      ? message.content.filter((part) => part.type === "tool-result")
      : []
  )
}

/**
 * "Fork from here": a new thread from the conversation as it stood before this model call (the thread's step
 * `at`, the number of replies before it), with an edit: a message taken in, or a tool result replaced. The
 * source thread is only read; the fork runs live and the page opens it.
 */
/** A fork form's field for the message its edit takes in (test ids `<prefix>-message`). */
function forkMessageField(form, prefix) {
  const message = h("textarea", { rows: 2, placeholder: "Message…", "data-testid": `${prefix}-message` })
  message.value = form.message
  message.addEventListener("input", () => (form.message = message.value))
  return message
}

/**
 * A fork form's fields for the tool result its edit replaces: which call (choosing one shows its result), the new
 * result as JSON, and whether it is a failure (test ids `<prefix>-call`, `-result`, `-failure`).
 */
function forkToolResultFields(form, results, prefix, redraw) {
  const call = h(
    "select",
    {
      "data-testid": `${prefix}-call`,
      onchange: () => {
        form.callId = call.value
        const chosen = results.find((part) => part.id === call.value)
        form.result = chosen === undefined ? "" : asJson(chosen.result)
        redraw()
      }
    },
    results.map((part) =>
      h("option", { value: part.id, selected: part.id === form.callId }, `${part.name} (${part.id})`)
    )
  )
  const result = h("textarea", { rows: 4, "data-testid": `${prefix}-result`, title: "The result, as JSON" })
  result.value = form.result
  result.addEventListener("input", () => (form.result = result.value))
  const checkbox = h("input", { type: "checkbox", "data-testid": `${prefix}-failure`, checked: form.isFailure })
  checkbox.addEventListener("change", () => (form.isFailure = checkbox.checked))
  return { call, result, failure: h("label", null, checkbox, " a failure") }
}

function renderFork(group, item, stateMessages, redraw) {
  const run = model.runs.get(item.runId)
  const threadId = run?.threadId ?? ""
  const at = stateMessages.filter((message) => message.role === "assistant").length
  const results = toolResultsOf(stateMessages)
  const form = item.fork ??= {
    to: `${threadId}-fork-${at}`,
    kind: "none",
    message: "",
    callId: results[0]?.id ?? "",
    result: results.length === 0 ? "" : asJson(results[0].result),
    isFailure: false,
    status: ""
  }
  const to = h("input", { value: form.to, "data-testid": "fork-to", title: "The new thread's id" })
  to.addEventListener("input", () => (form.to = to.value))
  const kind = h(
    "select",
    {
      "data-testid": "fork-edit",
      onchange: () => {
        form.kind = kind.value
        redraw()
      }
    },
    h("option", { value: "none", selected: form.kind === "none" }, "no edit: call the model again"),
    h("option", { value: "message", selected: form.kind === "message" }, "take a message in first"),
    results.length === 0
      ? null
      : h("option", { value: "toolResult", selected: form.kind === "toolResult" }, "replace a tool result")
  )
  const fields = []
  if (form.kind === "message") {
    fields.push(forkMessageField(form, "fork"))
  } else if (form.kind === "toolResult") {
    const { call, result, failure } = forkToolResultFields(form, results, "fork", redraw)
    fields.push(call, result, failure)
  }
  const submit = async () => {
    let edit
    if (form.kind === "message") {
      if (form.message.trim() === "") return show("Write the message to take in.")
      edit = { _tag: "Message", message: form.message }
    } else if (form.kind === "toolResult") {
      let result
      try {
        result = JSON.parse(form.result)
      } catch (error) {
        return show(`The result is not JSON: ${error.message}`)
      }
      edit = { _tag: "ToolResult", callId: form.callId, result, isFailure: form.isFailure }
    }
    show("Forking…")
    try {
      const response = await api(`/api/threads/${encodeURIComponent(threadId)}/fork`, {
        method: "POST",
        body: JSON.stringify({ to: form.to.trim(), at, ...(edit === undefined ? {} : { edit }) })
      })
      const body = await response.json()
      if (!response.ok) return show(`Not forked (${body.reason ?? body.error}): ${body.message}`)
      show(`Forked to ${body.threadId}.`)
      openThread(body.threadId)
    } catch (error) {
      show(`Not forked: ${error}`)
    }
  }
  function show(text) {
    form.status = text
    redraw()
  }
  return details(
    `${group.key}:fork`,
    `Fork from here: a new thread from the conversation before this model call (at: ${at}), with an edit`,
    h(
      "div",
      { class: "fork", "data-testid": "fork", "data-at": at },
      h("label", null, "new thread ", to),
      " ",
      kind,
      ...fields,
      h("div", null, h("button", { class: "primary", "data-testid": "fork-submit", onclick: submit }, "Fork")),
      h("div", { class: "meta", "data-testid": "fork-status" }, form.status)
    )
  )
}

// -- a fork of a stored thread ----------------------------------------------------

/** The fork forms of threads the inspector saw no run of, by thread id: what was typed outlives redraws. */
const storedForks = new Map()

/**
 * "Fork this thread", for a thread the inspector saw no run of (one stored before it started, opened from the
 * list): a new thread from its conversation before its step `at` (the number of replies before it; the number
 * of replies forks after the last one, where a waiting thread waits), with an edit: none (the model is called
 * again), a message taken in first, a tool result replaced, or, where the thread waits, a decision for the
 * fork's own wait. The server checks the step and the edit before anything runs; the page shows its typed
 * error, or opens the new thread.
 */
function renderStoredFork(thread) {
  const panel = mainParts.storedFork
  const shown = transcript !== null && transcript.threadId === thread.id ? transcript : null
  if (thread.runs.length > 0 || shown === null) {
    panel.hidden = true
    return
  }
  panel.hidden = false
  const messages = shown.messages
  // the loaded messages are the thread's last ones: their replies are its steps when none came before
  const replies = shown.offset === 0 ? messages.filter((message) => message.role === "assistant").length : undefined
  const waiting = thread.info?.pending != null
  const form = storedForks.get(thread.id) ?? {
    to: `${thread.id}-fork`,
    at: replies ?? 0,
    kind: "none",
    message: "",
    callId: "",
    result: "",
    isFailure: false,
    decision: "",
    status: ""
  }
  storedForks.set(thread.id, form)
  // the tool results before step `at` (of the loaded messages), the ones an edit may replace
  const results = toolResultsOf(shown.offset === 0 ? messages.slice(0, indexOfReply(messages, form.at)) : messages)
  if (form.kind === "toolResult" && !results.some((part) => part.id === form.callId)) {
    form.callId = results[0]?.id ?? ""
    form.result = results.length === 0 ? "" : asJson(results[0].result)
  }
  const key = `${thread.id}:${shown.version}:${waiting}:${form.at}:${form.kind}:${form.callId}:${form.status}`
  if (panel.dataset.key === key) return
  panel.dataset.key = key
  const redraw = () => schedule()
  const to = h("input", { value: form.to, "data-testid": "stored-fork-to", title: "The new thread's id" })
  to.addEventListener("input", () => (form.to = to.value))
  const at = h("input", {
    type: "number",
    min: 0,
    value: form.at,
    "data-testid": "stored-fork-at",
    title: "Fork before this step: the number of replies before it"
  })
  at.addEventListener("change", () => {
    form.at = Math.max(0, Math.floor(Number(at.value) || 0))
    redraw()
  })
  const kind = h(
    "select",
    {
      "data-testid": "stored-fork-edit",
      onchange: () => {
        form.kind = kind.value
        redraw()
      }
    },
    h("option", { value: "none", selected: form.kind === "none" }, "no edit: call the model again"),
    h("option", { value: "message", selected: form.kind === "message" }, "take a message in first"),
    h("option", { value: "toolResult", selected: form.kind === "toolResult" }, "replace a tool result"),
    waiting ? h("option", { value: "decision", selected: form.kind === "decision" }, "decide its wait") : null
  )
  const fields = []
  if (form.kind === "message") {
    fields.push(forkMessageField(form, "stored-fork"))
  } else if (form.kind === "toolResult") {
    const { call, result, failure } = forkToolResultFields(form, results, "stored-fork", redraw)
    fields.push(
      results.length === 0 ? h("div", { class: "muted" }, "No tool result comes before this step.") : call,
      result,
      failure
    )
  } else if (form.kind === "decision") {
    const decision = h("textarea", { rows: 6, "data-testid": "stored-fork-decision", title: "The decision, as JSON" })
    decision.value = form.decision
    decision.addEventListener("input", () => (form.decision = decision.value))
    fields.push(
      h("div", { class: "muted" }, "The fork asks again for itself: decide on its own request (as JSON)."),
      decision
    )
  }
  const show = (text) => {
    form.status = text
    redraw()
  }
  const submit = async () => {
    let edit
    if (form.kind === "message") {
      if (form.message.trim() === "") return show("Write the message to take in.")
      edit = { _tag: "Message", message: form.message }
    } else if (form.kind === "toolResult" || form.kind === "decision") {
      let value
      try {
        value = JSON.parse(form.kind === "decision" ? form.decision : form.result)
      } catch (error) {
        return show(`The ${form.kind === "decision" ? "decision" : "result"} is not JSON: ${error.message}`)
      }
      edit = form.kind === "decision"
        ? { _tag: "Decision", decision: value }
        : { _tag: "ToolResult", callId: form.callId, result: value, isFailure: form.isFailure }
    }
    show("Forking…")
    try {
      const response = await api(`/api/threads/${encodeURIComponent(thread.id)}/fork`, {
        method: "POST",
        body: JSON.stringify({ to: form.to.trim(), at: form.at, ...(edit === undefined ? {} : { edit }) })
      })
      const body = await response.json()
      if (!response.ok) return show(`Not forked (${body.reason ?? body.error}): ${body.message}`)
      show(`Forked to ${body.threadId}.`)
      openThread(body.threadId)
    } catch (error) {
      show(`Not forked: ${error}`)
    }
  }
  panel.replaceChildren(
    h("h3", null, "Fork this thread"),
    h(
      "div",
      { class: "fork", "data-testid": "stored-fork" },
      h("label", null, "new thread ", to),
      " ",
      h("label", null, "before step ", at),
      replies === undefined ? null : h("span", { class: "meta" }, ` (steps 0 to ${replies})`),
      " ",
      kind,
      ...fields,
      h("div", null, h("button", { class: "primary", "data-testid": "stored-fork-submit", onclick: submit }, "Fork")),
      h("div", { class: "meta", "data-testid": "stored-fork-status" }, form.status)
    )
  )
}

/** The index of the `at`-th assistant message (0-based), or the number of messages when there are fewer. */
function indexOfReply(messages, at) {
  let seen = 0
  for (let index = 0; index < messages.length; index++) {
    if (messages[index].role !== "assistant") continue
    if (seen === at) return index
    seen++
  }
  return messages.length
}

// -- stored threads and new runs ---------------------------------------------------

const stored = { threadIds: [], next: undefined, loading: false }

/** Opens a thread the inspector saw no run of: its summary (what it waits for) comes with its messages. */
async function openThread(threadId) {
  const thread = threadOf(threadId)
  model.selected = threadId
  model.selectedRun = null
  model.pinnedThread = true
  schedule()
  try {
    const response = await api(`/api/threads/${encodeURIComponent(threadId)}?limit=1`)
    if (!response.ok) return
    const body = await response.json()
    if (thread.info === null) thread.info = body.info
    schedule()
  } catch {
    // the transcript panel says what it could not load
  }
}

async function loadStored() {
  if (stored.loading) return
  stored.loading = true
  const status = document.getElementById("stored-status")
  try {
    const cursor = stored.next === undefined ? "" : `&cursor=${encodeURIComponent(stored.next)}`
    const response = await api(`/api/stored-threads?limit=50${cursor}`)
    if (response.status === 501) return
    const body = await response.json()
    if (!response.ok) {
      status.textContent = `Cannot list stored threads: ${body.message}`
      return
    }
    document.getElementById("stored").hidden = false
    stored.threadIds.push(...body.threadIds)
    stored.next = body.next ?? undefined
    status.textContent = stored.threadIds.length === 0 ? "No stored threads." : ""
    renderStored()
  } catch (error) {
    status.textContent = `Cannot list stored threads: ${error}`
  } finally {
    stored.loading = false
  }
}

function renderStored() {
  document.getElementById("stored-threads").replaceChildren(...stored.threadIds.map((id) =>
    h(
      "li",
      null,
      h("button", { "data-testid": "stored-thread", "data-thread": id, title: id, onclick: () => openThread(id) }, id)
    )
  ))
  document.getElementById("stored-more").hidden = stored.next === undefined
}

/** The new-run box: a message to a thread (`Agent.send`: starts a run, or joins the one going on). */
async function startRun() {
  const threadInput = document.getElementById("new-run-thread")
  const messageInput = document.getElementById("new-run-message")
  const status = document.getElementById("new-run-status")
  const threadId = threadInput.value.trim()
  if (threadId === "" || messageInput.value.trim() === "") {
    status.textContent = "Give a thread id and a message."
    return
  }
  status.textContent = "Sending…"
  try {
    const response = await api(`/api/threads/${encodeURIComponent(threadId)}/send`, {
      method: "POST",
      body: JSON.stringify({ message: messageInput.value, mode: "queue" })
    })
    const body = await response.json()
    if (!response.ok) {
      status.textContent = `Not started (${body.error}): ${body.message}`
      return
    }
    messageInput.value = ""
    status.textContent = body.delivery === "started" ? `Started a run on ${threadId}.` : `Sent (${body.delivery}).`
    openThread(threadId)
  } catch (error) {
    status.textContent = `Not started: ${error}`
  }
}

// -- approvals --------------------------------------------------------------------

function isApprovalRequest(value) {
  return value !== null && typeof value === "object" && Array.isArray(value.actionRequests) &&
    value.actionRequests.every((action) => action !== null && typeof action.callId === "string")
}

/** A SubAgents wait: the children it waits on, each with the interrupt it asked. */
function isTaskInterrupt(value) {
  return value !== null && typeof value === "object" && value._tag === "TaskInterrupt" &&
    Array.isArray(value.waits) &&
    value.waits.every((wait) =>
      wait !== null && typeof wait === "object" && typeof wait.callId === "string" &&
      wait.interrupt !== null && typeof wait.interrupt === "object"
    )
}

/** What the thread waits on, down through SubAgents waits: each asking value with the task calls leading to it. */
function leavesOf(value, path) {
  if (!isTaskInterrupt(value)) return [{ path, value }]
  return value.waits.flatMap((wait) =>
    leavesOf(wait.interrupt.value, [...path, { callId: wait.callId, agent: String(wait.agent) }])
  )
}

/**
 * The resume value of the decisions made: the decisions in order for a wait of the thread's own; for waits of
 * subagents, each child's decisions under the task calls leading to it (what `SubAgents.decide` builds).
 */
function resumeValueOf(entries, decisions) {
  if (entries.every((entry) => entry.leaf.path.length === 0)) return entries.map((entry) => decisions.get(entry.id))
  const root = {}
  for (const entry of entries) {
    const path = entry.leaf.path
    let node = root
    for (let i = 0; i < path.length - 1; i++) node = node[path[i].callId] ??= {}
    ;(node[path[path.length - 1].callId] ??= []).push(decisions.get(entry.id))
  }
  return root
}

function uiOf(thread) {
  const pending = thread.info?.pending
  if (pending === null || pending === undefined) return null
  let ui = approvalUi.get(thread.id)
  if (ui === undefined || ui.key !== pending.key) {
    ui = {
      key: pending.key,
      decisions: new Map(),
      modes: new Map(),
      error: null,
      errorKind: null,
      status: "idle",
      version: 0
    }
    approvalUi.set(thread.id, ui)
  }
  return ui
}

function bump(ui) {
  ui.version++
  schedule()
}

function renderApprovals(thread) {
  const container = mainParts.approvals
  const pending = thread.info?.pending
  const waiting = pending !== null && pending !== undefined && !thread.info.running
  const ui = waiting ? uiOf(thread) : null
  const notice = notices.get(thread.id)
  const key = ui === null
    ? `none:${notice ?? ""}`
    : `${ui.key}:${ui.version}:${thread.info.failure === null ? "" : thread.info.failure.message}`
  if (mainParts.approvalsKey === key) return
  mainParts.approvalsKey = key
  if (ui === null) {
    container.replaceChildren(
      notice === undefined ? "" : h(
        "section",
        { class: "panel" },
        h("div", { class: "error", "data-testid": "approval-notice" }, notice),
        h("button", {
          onclick: () => {
            notices.delete(thread.id)
            schedule()
          }
        }, "Dismiss")
      )
    )
    return
  }
  const panel = h("section", { class: "panel approvals", "data-testid": "approvals" })
  panel.append(h("h3", null, "Waiting for a decision"))
  const leaves = leavesOf(pending.value, [])
  if (leaves.every((leaf) => isApprovalRequest(leaf.value))) {
    // each action keyed by the task calls leading to it and its own call id
    const entries = leaves.flatMap((leaf) =>
      leaf.value.actionRequests.map((action) => ({
        leaf,
        action,
        id: JSON.stringify([...leaf.path.map((step) => step.callId), action.callId])
      }))
    )
    for (const leaf of leaves) {
      if (leaf.path.length > 0) {
        panel.append(h(
          "div",
          { class: "meta", "data-testid": "asked-by" },
          `asked by ${leaf.path.map((step) => `${step.agent} (task call ${step.callId})`).join(" › ")}`
        ))
      }
      for (const entry of entries) if (entry.leaf === leaf) panel.append(renderAction(thread, ui, entries, entry))
    }
    const count = entries.length
    if (count > 1) {
      panel.append(h("button", {
        class: "primary",
        "data-testid": "submit-decisions",
        disabled: ui.decisions.size < count || ui.status === "sending",
        onclick: () => submit(thread, ui, resumeValueOf(entries, ui.decisions))
      }, `Send ${ui.decisions.size} of ${count} decisions`))
    }
  } else {
    panel.append(renderGenericInterrupt(thread, ui, pending))
  }
  if (ui.status === "sending") panel.append(h("p", { class: "notice" }, "Sending…"))
  if (ui.status === "sent") {
    panel.append(h("p", { class: "notice", "data-testid": "sent" }, "Decision sent; the run continues."))
  }
  if (ui.error !== null) {
    panel.append(h("div", { class: "error", "data-testid": "approval-error", "data-kind": ui.errorKind }, ui.error))
  } else if (thread.info.failure !== null) {
    panel.append(
      h(
        "div",
        { class: "error", "data-testid": "approval-error", "data-kind": "failed" },
        `The last attempt failed (${thread.info.failure.error}): ${thread.info.failure.message}`
      )
    )
  }
  container.replaceChildren(panel)
}

function decide(thread, ui, entries, entry, unbound) {
  // bound to the wait and the call it answers: it cannot decide a later wait, even of an identical call
  const action = entry.action
  const decision = { ...unbound, waitKey: action.waitKey, fingerprint: action.fingerprint }
  ui.decisions.set(entry.id, decision)
  ui.modes.delete(entry.id)
  ui.error = null
  if (entries.length === 1) submit(thread, ui, resumeValueOf(entries, ui.decisions))
  else bump(ui)
}

function renderAction(thread, ui, entries, entry) {
  const action = entry.action
  const allowed = Array.isArray(action.allowedDecisions)
    ? action.allowedDecisions
    : ["approve", "edit", "reject", "respond"]
  const mode = ui.modes.get(entry.id) ?? null
  const chosen = ui.decisions.get(entry.id)
  const busy = ui.status !== "idle"
  const callPath = [...entry.leaf.path.map((step) => step.callId), action.callId].join("/")
  const element = h(
    "div",
    { class: "action", "data-testid": "action", "data-call": callPath, "data-tool": action.toolName },
    h(
      "div",
      null,
      h("strong", { class: "tool name" }, action.toolName),
      h("span", { class: "muted" }, ` · call ${action.callId}`)
    ),
    action.description ? h("pre", null, action.description) : null,
    h("div", { class: "meta" }, "arguments"),
    h("pre", { "data-testid": "action-args" }, json(action.args))
  )
  const setMode = (next) => () => {
    ui.modes.set(entry.id, next)
    ui.error = null
    bump(ui)
  }
  const buttons = h("div", { class: "buttons" })
  if (allowed.includes("approve")) {
    buttons.append(h("button", {
      class: "primary",
      "data-testid": "approve",
      disabled: busy,
      onclick: () => decide(thread, ui, entries, entry, { type: "approve", callId: action.callId })
    }, "Approve"))
  }
  if (allowed.includes("edit")) {
    buttons.append(h("button", { "data-testid": "edit", disabled: busy, onclick: setMode("edit") }, "Edit"))
  }
  if (allowed.includes("reject")) {
    buttons.append(
      h("button", { class: "danger", "data-testid": "reject", disabled: busy, onclick: setMode("reject") }, "Reject")
    )
  }
  if (allowed.includes("respond")) {
    buttons.append(h("button", { "data-testid": "respond", disabled: busy, onclick: setMode("respond") }, "Respond"))
  }
  element.append(buttons)
  if (chosen !== undefined && entries.length > 1) {
    element.append(h("p", { class: "notice" }, `Decision: ${chosen.type}`))
  }
  if (mode === "edit") {
    const editor = h("textarea", { "data-testid": "edit-args", spellcheck: "false" })
    editor.value = JSON.stringify(action.args ?? {}, null, 2)
    element.append(
      h("div", { class: "meta" }, "edited arguments (JSON)"),
      editor,
      h(
        "div",
        { class: "buttons" },
        h("button", {
          class: "primary",
          "data-testid": "send-edit",
          disabled: busy,
          onclick: () => {
            const problem = checkArgs(editor.value, action.argsSchema)
            if (problem.error !== null) {
              ui.error = problem.error
              ui.errorKind = "invalid"
              bump(ui)
              return
            }
            decide(thread, ui, entries, entry, { type: "edit", callId: action.callId, args: problem.args })
          }
        }, "Send edit"),
        h("button", { onclick: setMode(null) }, "Cancel")
      )
    )
  } else if (mode === "reject" || mode === "respond") {
    const input = h("textarea", {
      "data-testid": mode === "reject" ? "reject-reason" : "respond-text",
      placeholder: mode === "reject"
        ? "Why (the model reads this)"
        : "The answer the model gets instead of running the tool"
    })
    element.append(
      input,
      h(
        "div",
        { class: "buttons" },
        h("button", {
          class: mode === "reject" ? "danger" : "primary",
          "data-testid": mode === "reject" ? "send-reject" : "send-respond",
          disabled: busy,
          onclick: () => {
            const text = input.value.trim()
            if (mode === "respond") {
              if (text === "") {
                ui.error = "Write the answer first."
                ui.errorKind = "invalid"
                bump(ui)
                return
              }
              decide(thread, ui, entries, entry, { type: "respond", callId: action.callId, message: text })
            } else {
              decide(
                thread,
                ui,
                entries,
                entry,
                text === ""
                  ? { type: "reject", callId: action.callId }
                  : { type: "reject", callId: action.callId, message: text }
              )
            }
          }
        }, mode === "reject" ? "Send rejection" : "Send answer"),
        h("button", { onclick: setMode(null) }, "Cancel")
      )
    )
  }
  return element
}

function renderGenericInterrupt(thread, ui, pending) {
  const editor = h("textarea", { "data-testid": "resume-value", spellcheck: "false" })
  editor.value = "null"
  return h(
    "div",
    { class: "action" },
    h("p", null, `Middleware "${pending.middleware}" waits for a value:`),
    h("pre", null, json(pending.value)),
    h("div", { class: "meta" }, "resume with (JSON)"),
    editor,
    h(
      "div",
      { class: "buttons" },
      h("button", {
        class: "primary",
        "data-testid": "resume",
        disabled: ui.status !== "idle",
        onclick: () => {
          let value
          try {
            value = JSON.parse(editor.value)
          } catch (error) {
            ui.error = `Not valid JSON: ${error.message}`
            ui.errorKind = "invalid"
            bump(ui)
            return
          }
          submit(thread, ui, value)
        }
      }, "Resume")
    )
  )
}

/** Parses edited arguments and checks them against the request's JSON Schema (the common keywords). */
function checkArgs(text, schema) {
  let args
  try {
    args = JSON.parse(text)
  } catch (error) {
    return { error: `The arguments are not valid JSON: ${error.message}`, args: null }
  }
  if (args === null || typeof args !== "object" || Array.isArray(args)) {
    return { error: "The arguments must be a JSON object.", args: null }
  }
  const problems = schema === undefined || schema === null ? [] : validate(schema, args, "arguments")
  return problems.length > 0 ? { error: problems.join("\n"), args: null } : { error: null, args }
}

function typeOf(value) {
  if (value === null) return "null"
  if (Array.isArray(value)) return "array"
  if (typeof value === "number") return Number.isInteger(value) ? "integer" : "number"
  return typeof value
}

function validate(schema, value, path) {
  if (schema === null || typeof schema !== "object") return []
  const problems = []
  const types = schema.type === undefined ? null : [].concat(schema.type)
  const actual = typeOf(value)
  if (types !== null && !types.includes(actual) && !(actual === "integer" && types.includes("number"))) {
    return [`${path} must be ${types.join(" or ")}, got ${actual}`]
  }
  if (Array.isArray(schema.enum) && !schema.enum.some((option) => JSON.stringify(option) === JSON.stringify(value))) {
    problems.push(`${path} must be one of ${schema.enum.map((option) => JSON.stringify(option)).join(", ")}`)
  }
  if (actual === "object") {
    for (const name of schema.required ?? []) {
      if (!(name in value)) problems.push(`${path}.${name} is missing`)
    }
    for (const [name, sub] of Object.entries(schema.properties ?? {})) {
      if (name in value) problems.push(...validate(sub, value[name], `${path}.${name}`))
    }
    if (schema.additionalProperties === false) {
      for (const name of Object.keys(value)) {
        if (!(name in (schema.properties ?? {}))) problems.push(`${path}.${name} is not allowed`)
      }
    }
  }
  if (actual === "array" && schema.items !== undefined) {
    value.forEach((item, index) => problems.push(...validate(schema.items, item, `${path}[${index}]`)))
  }
  return problems
}

async function submit(thread, ui, value) {
  ui.status = "sending"
  ui.error = null
  bump(ui)
  try {
    const response = await api(`/api/threads/${encodeURIComponent(thread.id)}/resume`, {
      method: "POST",
      body: JSON.stringify({ key: ui.key, value })
    })
    const body = await response.json().catch(() => ({}))
    if (response.status === 202) {
      ui.status = "sent"
      notices.delete(thread.id)
    } else {
      ui.status = "idle"
      ui.decisions.clear()
      ui.errorKind = response.status === 409 ? "decided" : "invalid"
      ui.error = response.status === 409
        ? body.message ?? "Already decided."
        : `${body.error ?? `HTTP ${response.status}`}${body.reason === undefined ? "" : ` (${body.reason})`}: ${
          body.message ?? "the decision was refused"
        }`
      if (response.status === 409) notices.set(thread.id, ui.error)
    }
  } catch (error) {
    ui.status = "idle"
    ui.errorKind = "network"
    ui.error = `Could not reach the inspector: ${error.message}`
  }
  bump(ui)
}

// -----------------------------------------------------------------------------
// the event stream
// -----------------------------------------------------------------------------

function connect() {
  const source = new EventSource(`/events?token=${encodeURIComponent(token)}`)
  source.addEventListener("hello", (message) => {
    if (JSON.parse(message.data).reset) resetModel()
    model.connection = "live"
    schedule()
  })
  source.addEventListener("reset", () => {
    resetModel()
    schedule()
  })
  source.addEventListener("closed", () => {
    source.close()
    model.connection = "stopped"
    schedule()
  })
  source.onmessage = (message) => {
    for (const entry of JSON.parse(message.data)) apply(entry)
    schedule()
  }
  source.onerror = () => {
    if (model.connection === "stopped") return
    model.connection = source.readyState === EventSource.CLOSED ? "stopped" : "reconnecting"
    schedule()
  }
}

document.getElementById("new-run-send").addEventListener("click", startRun)
document.getElementById("stored-more").addEventListener("click", loadStored)
connect()
loadStored()
render()
