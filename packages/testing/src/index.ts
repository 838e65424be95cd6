/**
 * @since 0.1.0
 */
export * as Arbitraries from "./Arbitraries.js"

/**
 * @since 0.1.0
 */
export * as Eval from "./Eval.js"

/**
 * @since 0.1.0
 */
export * as Fixtures from "./Fixtures.js"

/**
 * @since 0.1.0
 */
export * as HookRecorder from "./HookRecorder.js"

/**
 * @since 0.1.0
 */
export * as Messages from "./Messages.js"

/**
 * @since 0.1.0
 */
export * as ScriptedModel from "./ScriptedModel.js"

/**
 * @since 0.1.0
 */
export * as SpanRecorder from "./SpanRecorder.js"
