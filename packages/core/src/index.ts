/**
 * @since 0.1.0
 */
export * as Agent from "./Agent.js"

/**
 * @since 0.1.0
 */
export * as AgentError from "./AgentError.js"

/**
 * @since 0.1.0
 */
export * as AgentEvent from "./AgentEvent.js"

/**
 * @since 0.1.0
 */
export * as AgentResult from "./AgentResult.js"

/**
 * @since 0.1.0
 */
export * as AgentState from "./AgentState.js"

/**
 * @since 0.1.0
 */
export * as AiFailure from "./AiFailure.js"

/**
 * @since 0.1.0
 */
export * as Checkpointer from "./Checkpointer.js"

/**
 * @since 0.1.0
 */
export * as EventLoop from "./EventLoop.js"

/**
 * @since 0.1.0
 */
export * as Fork from "./Fork.js"

/**
 * @since 0.1.0
 */
export * as HttpConnection from "./HttpConnection.js"

/**
 * @since 0.1.0
 */
export * as Middleware from "./Middleware.js"

/**
 * @since 0.1.0
 */
export * as ModelProfile from "./ModelProfile.js"

/**
 * @since 0.1.0
 */
export * as RunJournal from "./RunJournal.js"

/**
 * @since 0.1.0
 */
export * as RunRecord from "./RunRecord.js"

/**
 * @since 0.1.0
 */
export * as Secrets from "./Secrets.js"

/**
 * @since 0.1.0
 */
export * as TokenCounter from "./TokenCounter.js"

/**
 * @since 0.1.0
 */
export * as ToolContext from "./ToolContext.js"

/**
 * @since 0.1.0
 */
export * as ToolEffect from "./ToolEffect.js"

/**
 * @since 0.1.0
 */
export * as ToolName from "./ToolName.js"

/**
 * @since 0.1.0
 */
export * as Transcript from "./Transcript.js"

/**
 * @since 0.1.0
 */
export * as UiMessageStream from "./UiMessageStream.js"

/**
 * @since 0.1.0
 */
export * as Usage from "./Usage.js"

/**
 * @since 0.1.0
 */
export * as Wait from "./Wait.js"
