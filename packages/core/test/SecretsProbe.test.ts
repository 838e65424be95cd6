import * as Secrets from "@stepwise-agent/core/Secrets"
import { describe, expect, it } from "vitest"
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import * as Redacted from "effect/Redacted"

const key = "Zq7vN3pL0xW9rT2kB5mY8cJ4"
const cases: Array<[string, string]> = [
  ["X-Goog-Api-Key", `X-Goog-Api-Key: ${key}`],
  ["x-amz-security-token", `x-amz-security-token: ${key}`],
  ["X-Auth", `X-Auth: ${key}`],
  ["PRIVATE-TOKEN", `PRIVATE-TOKEN: ${key}`],
  ["x-api-token", `x-api-token: ${key}`],
  ["apikey", `apikey: ${key}`],
  ["X-Stepwise-Creds", `X-Stepwise-Creds: ${key}`],
  ["X-Stepwise-Cred", `X-Stepwise-Cred: ${key}`],
  ["x-api-pass", `x-api-pass: ${key}`],
  ["json creds", `{"X-Stepwise-Creds":"${key}"}`],
  ["userinfo", `GET https://user:${key}@example.com/v1 failed`],
  ["userinfo token only", `GET https://${key}@example.com/v1 failed`],
  ["basic", `sent Basic ${Buffer.from(`user:${key}`).toString("base64")} and failed`],
  ["authorization basic", `Authorization: Basic ${Buffer.from(`user:${key}`).toString("base64")}`],
  ["html quot", `{&quot;api_key&quot;:&quot;${key}&quot;}`],
  ["html 34", `{&#34;api_key&#34;:&#34;${key}&#34;}`],
  ["url-encoded json", encodeURIComponent(`{"api_key":"${key}"}`)],
  ["url-encoded param", `next=${encodeURIComponent(`/cb?api_key=${key}`)}`],
  ["json in json", JSON.stringify(JSON.stringify({ api_key: key }))],
  ["json in json in json", JSON.stringify(JSON.stringify(JSON.stringify({ api_key: key })))],
  ["unicode escaped quote", `{\\u0022api_key\\u0022:\\u0022${key}\\u0022}`],
  ["pretty newline", `{\n  "api_key":\n    "${key}"\n}`],
  ["colon newline", `api_key:\n  ${key}`],
  ["equals spaces", `api_key = ${key}`],
  ["yaml", `  apiKey: '${key}'`],
  ["python repr", `{'api_key': '${key}'}`],
  ["tuple", `('api_key', '${key}')`],
  ["Map inspect", `Map(1) { 'x-api-key' => '${key}' }`],
  ["header object inspect", `headers: { 'x-goog-api-key': '${key}' }`],
  ["token scheme", `Authorization: Token ${key}`],
  ["set-cookie", `Set-Cookie: session=${key}; Path=/`],
  ["cookie pairs", `Cookie: theme=dark; sid=${key}`],
  ["query key", `GET /v1?key=${key}`],
  ["query semicolon", `GET /v1;key=${key}`],
  ["path bot", `POST https://api.telegram.org/bot123456:${key}/sendMessage`],
  ["env", `OPENAI_API_KEY=${key}`],
  ["CLI flag", `--api-key ${key}`],
  ["CLI flag eq", `--api-key=${key}`],
  ["xml", `<apiKey>${key}</apiKey>`],
  ["aws", `AWS_SECRET_ACCESS_KEY=${key}`],
  ["client_secret form", `grant_type=client_credentials&client_secret=${key}`],
  ["sk- bare", `invalid sk-proj-${key}`],
]

describe("probe", () => {
  for (const [name, text] of cases) {
    it(name, () => {
      const out = Secrets.scrubText(text)
      expect(out, out).not.toContain(key)
      expect(out, out).not.toContain(Buffer.from(`user:${key}`).toString("base64"))
    })
  }
  it("registered, split and encodings", () =>
    Effect.gen(function*() {
      yield* Secrets.register(key)
      for (
        const text of [
          `html ${key.replace(/y/g, "&#121;")}`,
          `base64 ${Buffer.from(key).toString("base64")}`,
          `b64 basic ${Buffer.from(`u:${key}`).toString("base64")}`,
          `split ${key.slice(0, 10)}\n${key.slice(10)}`,
          `upper ${key.toUpperCase()}`,
        ]
      ) {
        const out = Secrets.scrubText(text)
        console.log(out)
      }
    }).pipe(Effect.scoped, Effect.runPromise))
  it("error objects", () => {
    class Creds {
      constructor(readonly apiKey: string) {}
    }
    class Getter {
      get token() {
        return key
      }
    }
    class T extends Data.TaggedError("T")<{ readonly apiKey: string; readonly detail: string }> {}
    const circ: any = { api_key: key }
    circ.self = circ
    const list: Array<[string, unknown]> = [
      ["class cause", new Error("x", { cause: new Creds(key) })],
      ["map cause", new Error("x", { cause: new Map([["api_key", key]]) })],
      ["getter", new Error("x", { cause: new Getter() })],
      ["toJSON", new Error("x", { cause: { toJSON: () => ({ api_key: key }) } })],
      ["tagged", new T({ apiKey: key, detail: `x-goog-api-key: ${key}` })],
      ["circ", new Error("x", { cause: circ })],
      ["stack", Object.assign(new Error("x"), { stack: `Error: api_key=${key}\n  at x` })],
      ["Redacted", new Error("x", { cause: { value: Redacted.make(key) } })],
    ]
    for (const [name, e] of list) {
      const s = Secrets.scrubError(e)
      const util = require("node:util")
      const shown = util.inspect(s, { depth: 10, getters: true }) + JSON.stringify(s) + String(s) + Secrets.messageOf(e)
      console.log(name, shown.includes(key) ? "LEAK" : "ok")
    }
  })
})
