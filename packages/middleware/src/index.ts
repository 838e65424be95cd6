/**
 * @since 0.1.0
 */
export * as Budget from "./Budget.js"

/**
 * @since 0.1.0
 */
export * as ContextEditing from "./ContextEditing.js"

/**
 * @since 0.1.0
 */
export * as ContextOverflow from "./ContextOverflow.js"

/**
 * @since 0.1.0
 */
export * as ContextView from "./ContextView.js"

/**
 * @since 0.1.0
 */
export * as DynamicSystemPrompt from "./DynamicSystemPrompt.js"

/**
 * @since 0.1.0
 */
export * as Filesystem from "./Filesystem.js"

/**
 * @since 0.1.0
 */
export * as Guardrail from "./Guardrail.js"

/**
 * @since 0.1.0
 */
export * as HumanInTheLoop from "./HumanInTheLoop.js"

/**
 * @since 0.1.0
 */
export * as LlmToolSelector from "./LlmToolSelector.js"

/**
 * @since 0.1.0
 */
export * as Logging from "./Logging.js"

/**
 * @since 0.1.0
 */
export * as ModelCallLimit from "./ModelCallLimit.js"

/**
 * @since 0.1.0
 */
export * as ModelFallback from "./ModelFallback.js"

/**
 * @since 0.1.0
 */
export * as ModelRetry from "./ModelRetry.js"

/**
 * @since 0.1.0
 */
export * as Offload from "./Offload.js"

/**
 * @since 0.1.0
 */
export * as Pii from "./Pii.js"

/**
 * @since 0.1.0
 */
export * as RateLimit from "./RateLimit.js"

/**
 * @since 0.1.0
 */
export * as RiskApproval from "./RiskApproval.js"

/**
 * @since 0.1.0
 */
export * as SubAgents from "./SubAgents.js"

/**
 * @since 0.1.0
 */
export * as Summarization from "./Summarization.js"

/**
 * @since 0.1.0
 */
export * as TodoList from "./TodoList.js"

/**
 * @since 0.1.0
 */
export * as ToolCallLimit from "./ToolCallLimit.js"

/**
 * @since 0.1.0
 */
export * as ToolEmulator from "./ToolEmulator.js"

/**
 * @since 0.1.0
 */
export * as ToolErrors from "./ToolErrors.js"

/**
 * @since 0.1.0
 */
export * as ToolRetry from "./ToolRetry.js"

/**
 * @since 0.1.0
 */
export * as Tracing from "./Tracing.js"

/**
 * @since 0.1.0
 */
export * as Workspace from "./Workspace.js"
