/**
 * The one list of test projects; `vitest.config.ts` imports it.
 */
export default [
  "packages/core",
  "packages/testing",
  "packages/middleware",
  "packages/workflow",
  "packages/inspector",
  "packages/mcp",
  "packages/demo"
]
