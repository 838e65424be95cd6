/**
 * @since 0.1.0
 */
export * as Calculator from "./Calculator.js"

/**
 * @since 0.1.0
 */
export * as DemoModel from "./DemoModel.js"

/**
 * @since 0.1.0
 */
export * as DemoTools from "./DemoTools.js"
