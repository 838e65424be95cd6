import * as os from "node:os"
import { defineConfig } from "vitest/config"
import projects from "./vitest.workspace.js"

export default defineConfig({
  test: {
    projects,
    // one test file per core, not one fewer: many files wait on child processes, servers and timers
    maxWorkers: os.availableParallelism()
  }
})
