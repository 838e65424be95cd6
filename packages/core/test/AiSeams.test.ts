/**
 * The shapes of `@effect/ai`'s reported usage and errors change in Effect 4,
 * so each is read in one function (`internal/aiSeams.ts`, public as
 * `Usage.read` and `AiFailure.classify`): these tests fix what each reads,
 * and that no other source module reads those shapes itself.
 */
import { AiError, Response } from "@effect/ai"
import { assert, describe, it } from "@effect/vitest"
import { AgentError, AiFailure, Usage } from "@stepwise-agent/core"
import { Option } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"

const request = {
  method: "POST" as const,
  url: "https://api.example/v1",
  urlParams: [],
  hash: Option.none(),
  headers: {}
}

describe("AiFailure.classify", () => {
  const cases: ReadonlyArray<
    readonly [string, AiError.AiError | AgentError.ModelReplyError, Partial<AiFailure.AiFailure>]
  > = [
    [
      "a transport failure",
      new AiError.HttpRequestError({ module: "OpenAi", method: "generateText", reason: "Transport", request }),
      { kind: "transport", tag: "HttpRequestError", reason: "Transport", status: undefined, module: "OpenAi" }
    ],
    [
      "a request that did not encode",
      new AiError.HttpRequestError({ module: "OpenAi", method: "generateText", reason: "Encode", request }),
      { kind: "request", reason: "Encode" }
    ],
    [
      "an error status, with headers and body",
      new AiError.HttpResponseError({
        module: "OpenAi",
        method: "generateText",
        reason: "StatusCode",
        request,
        response: { status: 429, headers: { "retry-after": "2" } },
        body: "{\"error\":\"slow down\"}",
        description: "rate limited"
      }),
      {
        kind: "status",
        tag: "HttpResponseError",
        reason: "StatusCode",
        status: 429,
        headers: { "retry-after": "2" },
        body: "{\"error\":\"slow down\"}",
        description: "rate limited",
        method: "generateText"
      }
    ],
    [
      "a response that did not decode",
      new AiError.HttpResponseError({
        module: "OpenAi",
        method: "generateText",
        reason: "Decode",
        request,
        response: { status: 200, headers: {} }
      }),
      { kind: "response", reason: "Decode", status: 200, body: undefined }
    ],
    [
      "a malformed output",
      new AiError.MalformedOutput({ module: "Toolkit", method: "handle", description: "bad", cause: "why" }),
      { kind: "malformed-output", tag: "MalformedOutput", module: "Toolkit", description: "bad", cause: "why" }
    ],
    [
      "a malformed input",
      new AiError.MalformedInput({ module: "Toolkit", method: "handle", description: "bad input" }),
      { kind: "malformed-input", description: "bad input", status: undefined, headers: {} }
    ],
    [
      "any other AiError",
      new AiError.UnknownError({ module: "OpenAi", method: "streamText", description: "?" }),
      { kind: "unknown", tag: "UnknownError", description: "?" }
    ],
    [
      "a reply error",
      new AgentError.ModelReplyError({
        reason: "Empty",
        step: 0,
        streamed: false,
        text: "",
        received: [],
        finishReason: "stop"
      }),
      { kind: "reply", tag: "ModelReplyError", reason: "Empty", module: undefined, status: undefined }
    ]
  ]
  for (const [name, error, expected] of cases) {
    it(`reads ${name}`, () => {
      const failure = AiFailure.classify(error)
      for (const [key, value] of Object.entries(expected)) {
        assert.deepStrictEqual(failure[key as keyof AiFailure.AiFailure], value, key)
      }
    })
  }

  it("tells an AiError from anything else", () => {
    assert.isTrue(AiFailure.isAiError(cases[0][1]))
    assert.isFalse(AiFailure.isAiError(cases.at(-1)![1]))
    assert.isFalse(AiFailure.isAiError(new Error("no")))
  })
})

describe("Usage.read", () => {
  it("reads every count a provider reported, and undefined for what it did not", () => {
    assert.deepStrictEqual(
      Usage.read(
        new Response.Usage({
          inputTokens: 10,
          outputTokens: 2,
          totalTokens: 13,
          reasoningTokens: 1,
          cachedInputTokens: 4
        })
      ),
      { inputTokens: 10, outputTokens: 2, totalTokens: 13, reasoningTokens: 1, cachedInputTokens: 4 }
    )
    assert.deepStrictEqual(
      Usage.read(new Response.Usage({ inputTokens: undefined, outputTokens: 3, totalTokens: undefined })),
      {
        inputTokens: undefined,
        outputTokens: 3,
        totalTokens: undefined,
        reasoningTokens: undefined,
        cachedInputTokens: undefined
      }
    )
  })

  it("a run's usage adds what Usage.read reads (no total: in + out)", () => {
    const total = Usage.add(
      Usage.add(Usage.empty, new Response.Usage({ inputTokens: 10, outputTokens: 2, totalTokens: 13 })),
      new Response.Usage({ inputTokens: 5, outputTokens: undefined, totalTokens: undefined })
    )
    assert.deepStrictEqual({ ...total }, { inputTokens: 15, outputTokens: 2, totalTokens: 18 })
  })
})

describe("the seams are the only readers", () => {
  const packages = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..")
  const sources = (dir: string): Array<string> =>
    fs.readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
      const file = path.join(entry.parentPath, entry.name)
      return entry.isDirectory() ? sources(file) : entry.name.endsWith(".ts") ? [file] : []
    })
  // the packages that run agents; bench and testing build these values (fakes), they do not classify them
  const files = ["core", "middleware", "workflow", "mcp", "inspector", "demo"]
    .flatMap((pkg) => sources(path.join(packages, pkg, "src")))
    .filter((file) => !file.endsWith(path.join("internal", "aiSeams.ts")))
  const readers: ReadonlyArray<readonly [string, RegExp]> = [
    [
      "an AiError's tag",
      /(_tag\s*[!=]==\s*|case\s+)"(HttpRequestError|HttpResponseError|MalformedOutput|MalformedInput|UnknownError)"/
    ],
    ["an AiError's response", /\.response\.(status|headers)\b/],
    ["AiError.isAiError", /AiError\.isAiError\(/],
    [
      "a reported usage's fields",
      /response\.usage\.(inputTokens|outputTokens|totalTokens|reasoningTokens|cachedInputTokens)/
    ]
  ]
  it("no source module reads an AiError's or a reported usage's fields itself", () => {
    const found: Array<string> = []
    for (const file of files) {
      const lines = fs.readFileSync(file, "utf8").split("\n")
      lines.forEach((line, i) => {
        if (/^\s*(\*|\/\/)/.test(line)) return // doc comments and examples
        for (const [what, pattern] of readers) {
          if (pattern.test(line)) found.push(`${path.relative(packages, file)}:${i + 1} reads ${what}`)
        }
      })
    }
    assert.deepStrictEqual(found, [])
  })
})
