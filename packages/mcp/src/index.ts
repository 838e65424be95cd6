/**
 * @since 0.1.0
 */
export * as McpToolkit from "./McpToolkit.js"
