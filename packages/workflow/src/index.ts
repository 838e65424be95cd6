/**
 * @since 0.1.0
 */
export * as AgentEngine from "./AgentEngine.js"

/**
 * @since 0.1.0
 */
export * as AgentWorkflow from "./AgentWorkflow.js"

/**
 * @since 0.1.0
 */
export * as Authorizer from "./Authorizer.js"

/**
 * @since 0.1.0
 */
export * as RecordStore from "./RecordStore.js"

/**
 * @since 0.1.0
 */
export * as RunStore from "./RunStore.js"

/**
 * @since 0.1.0
 */
export * as SqlCheckpointer from "./SqlCheckpointer.js"
