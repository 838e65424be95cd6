/**
 * @since 0.1.0
 */
export * as Inspector from "./Inspector.js"

/**
 * @since 0.1.0
 */
export * as TraceExport from "./TraceExport.js"
