/**
 * @since 0.1.0
 */
export * as ScriptedModel from "./ScriptedModel.js"
