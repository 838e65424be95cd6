/**
 * The one convention of every package's error classes (`docs/errors.md`):
 * `reason` is the one field saying why. A class with one cause keeps its
 * free text there; a class of a domain with several causes has a literal
 * `reason` naming the cause, and its free text, if any, in `detail`. An error
 * another error failed with is kept as a value, never as its tag in text.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Core from "@stepwise-agent/core"
import * as Inspector from "@stepwise-agent/inspector"
import * as Mcp from "@stepwise-agent/mcp"
import * as MiddlewarePackage from "@stepwise-agent/middleware"
import * as Testing from "@stepwise-agent/testing"
import * as Workflow from "@stepwise-agent/workflow"
import { Arbitrary, FastCheck, type Schema, SchemaAST } from "effect"

const packages = {
  core: Core,
  middleware: MiddlewarePackage,
  workflow: Workflow,
  testing: Testing,
  inspector: Inspector,
  mcp: Mcp
}

interface ErrorClass {
  readonly name: string
  readonly schema: Schema.Schema<Error>
  readonly fields: Readonly<Record<string, { readonly ast: SchemaAST.AST | { readonly type: SchemaAST.AST } }>>
}

/** Every exported `Schema.TaggedError` class of every package, by `package/Module.Class`. */
const errorClasses = (): ReadonlyArray<ErrorClass> => {
  const found = new Map<unknown, ErrorClass>()
  for (const [packageName, modules] of Object.entries(packages)) {
    for (const [moduleName, module] of Object.entries(modules as Record<string, unknown>)) {
      if (typeof module !== "object" || module === null) continue
      for (const [name, value] of Object.entries(module)) {
        if (typeof value !== "function" || !("fields" in value) || !(value.prototype instanceof Error)) continue
        if (!found.has(value)) {
          found.set(value, {
            name: `${packageName}/${moduleName}.${name}`,
            fields: value.fields as ErrorClass["fields"],
            schema: value as unknown as Schema.Schema<Error>
          })
        }
      }
    }
  }
  return [...found.values()]
}

/** A field's type, without the `undefined` of an optional field. */
const typeOf = (field: ErrorClass["fields"][string]): ReadonlyArray<SchemaAST.AST> => {
  // an optional field is a property signature around its type
  const ast = "type" in field.ast ? field.ast.type as SchemaAST.AST : field.ast
  return (SchemaAST.isUnion(ast) ? ast.types : [ast]).filter((type) => type._tag !== "UndefinedKeyword")
}

const isText = (field: ErrorClass["fields"][string]) => {
  const types = typeOf(field)
  return types.length === 1 && types[0]!._tag === "StringKeyword"
}
const isKind = (field: ErrorClass["fields"][string]) => typeOf(field).every(SchemaAST.isLiteral)

describe("error classes of every package", () => {
  const classes = errorClasses()

  it("are found in every package", () => {
    assert.isAbove(classes.length, 50)
    for (const name of ["core/AgentError.InvalidOptions", "middleware/Workspace.WorkspaceError", "mcp/McpToolkit."]) {
      assert.isTrue(classes.some((error) => error.name.startsWith(name)), name)
    }
  })

  it("name their free text reason (or detail beside a literal reason), never description or problem", () => {
    for (const error of classes) {
      for (const name of ["description", "problem", "explanation", "why"]) {
        assert.notProperty(error.fields, name, `${error.name} has a field "${name}": name it reason`)
      }
      const { detail, reason } = error.fields
      if (reason !== undefined) {
        assert.isTrue(isText(reason) || isKind(reason), `${error.name}.reason is free text or a literal kind`)
      }
      if (reason !== undefined && isKind(reason)) {
        for (const kind of typeOf(reason) as ReadonlyArray<SchemaAST.Literal>) {
          assert.match(String(kind.literal), /^[A-Z][A-Za-z0-9]*$/, `${error.name}.reason kinds are PascalCase`)
        }
      }
      if (detail !== undefined) {
        assert.isTrue(reason !== undefined && isKind(reason), `${error.name}.detail stands beside a literal reason`)
      }
    }
  })

  it("say what happened in a message for every value of their fields (every reason of a domain error)", () => {
    for (const error of classes) {
      for (const value of FastCheck.sample(Arbitrary.make(error.schema), 25)) {
        assert.isString(value.message, error.name)
        if (error.fields.reason !== undefined && isKind(error.fields.reason)) {
          assert.isAbove(value.message.trim().length, 0, error.name)
        }
      }
    }
  })

  it("keep an error they carry as a value, not its tag as text", () => {
    for (const error of classes) {
      const carried = error.fields.error
      if (carried === undefined) continue
      assert.isFalse(isText(carried), `${error.name}.error holds a tag as a string`)
    }
  })
})
