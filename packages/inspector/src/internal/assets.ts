/**
 * The page's files, shipped in the package's `assets/` folder and read once
 * when the inspector starts.
 */
import * as NodeFileSystem from "@effect/platform-node/NodeFileSystem"
import * as FileSystem from "@effect/platform/FileSystem"
import * as Effect from "effect/Effect"
import { fileURLToPath } from "node:url"

export interface Asset {
  readonly contentType: string
  readonly body: string
}

export interface Assets {
  /** The page, with `%TOKEN%` where the access token goes. */
  readonly page: string
  readonly files: ReadonlyMap<string, Asset>
}

const directory = fileURLToPath(new URL("../../assets/", import.meta.url))

export const load: Effect.Effect<Assets, string> = Effect.gen(function*() {
  const fs = yield* FileSystem.FileSystem
  const read = (name: string) => fs.readFileString(directory + name)
  const [page, script, style] = yield* Effect.all([
    read("index.html"),
    read("inspector.js"),
    read("inspector.css")
  ])
  return {
    page,
    files: new Map([
      ["inspector.js", { contentType: "text/javascript; charset=utf-8", body: script }],
      ["inspector.css", { contentType: "text/css; charset=utf-8", body: style }]
    ])
  }
}).pipe(
  Effect.mapError((error) => `cannot read the page's files in ${directory}: ${error.message}`),
  Effect.provide(NodeFileSystem.layer)
)
