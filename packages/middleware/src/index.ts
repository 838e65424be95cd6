/**
 * @since 0.1.0
 */
export * as HumanInTheLoop from "./HumanInTheLoop.js"

/**
 * @since 0.1.0
 */
export * as TodoList from "./TodoList.js"
