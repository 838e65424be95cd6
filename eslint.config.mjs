import effectEslint from "@effect/eslint-plugin"
import js from "@eslint/js"
import { defineConfig, globalIgnores } from "eslint/config"
import tseslint from "typescript-eslint"

export default defineConfig(
  globalIgnores(["**/.docs-check", "**/dist", "**/build", "**/docs", "**/.tsbuildinfo", "**/node_modules", "**/*.mjs", "docs/**"]),
  js.configs.recommended,
  tseslint.configs.recommended,
  effectEslint.configs.dprint,
  {
    rules: {
      "no-console": "error",
      "object-shorthand": "error",
      "require-yield": "off",
      "@typescript-eslint/array-type": ["warn", { default: "generic", readonly: "generic" }],
      "@typescript-eslint/consistent-type-imports": "warn",
      "@typescript-eslint/no-explicit-any": "off",
      "@typescript-eslint/no-namespace": "off",
      "@typescript-eslint/no-empty-object-type": "off",
      "@typescript-eslint/no-unused-vars": ["error", { argsIgnorePattern: "^_", varsIgnorePattern: "^_" }],
      "@effect/dprint": ["error", {
        config: {
          indentWidth: 2,
          lineWidth: 120,
          semiColons: "asi",
          quoteStyle: "alwaysDouble",
          trailingCommas: "never",
          operatorPosition: "maintain",
          "arrowFunction.useParentheses": "force"
        }
      }]
    }
  },
  {
    files: ["packages/*/src/**/*.ts"],
    ignores: ["packages/demo/**", "packages/bench/**"],
    rules: {
      "@effect/no-import-from-barrel-package": ["error", { packageNames: ["effect", "@effect/platform", "@effect/ai"] }]
    }
  },
  {
    files: ["packages/demo/**/*.ts", "packages/bench/**/*.ts", "packages/*/test/processes/**/*.ts"],
    rules: { "no-console": "off" }
  }
)
