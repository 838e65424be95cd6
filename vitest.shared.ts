import * as path from "node:path"
import type { ViteUserConfig } from "vitest/config"

/**
 * Workspace packages resolve to their TypeScript sources (their `exports` condition), not their
 * build; the rest are Vite's default server conditions.
 */
const conditions = ["@stepwise-agent/source", "module", "node", "development|production"]

const config: ViteUserConfig = {
  esbuild: { target: "es2022" },
  resolve: { conditions },
  ssr: { resolve: { conditions } },
  test: {
    setupFiles: [path.join(__dirname, "vitest.setup.ts")],
    include: ["test/**/*.test.ts"],
    // room for a machine busy with other work: a property test of ~1.3 s on a quiet machine took 36 s beside six
    // other test files and four CPU-bound processes on 2 cores
    testTimeout: 60_000
  }
}

export default config
