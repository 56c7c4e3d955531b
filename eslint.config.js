// Lint for src/, test/, bench/ and scripts/: ESLint's and typescript-eslint's recommended rules (syntax
// only, no type information, so it stays fast), and no import cycle in src/ (import-x/no-cycle, which
// test/import-graph.test.ts also checks along with the layering).
import js from "@eslint/js";
import tseslint from "typescript-eslint";
import { importX } from "eslint-plugin-import-x";
import { createTypeScriptImportResolver } from "eslint-import-resolver-typescript";
import globals from "globals";

export default tseslint.config(
  { ignores: ["dist/**", "node_modules/**", ".langgraph_api/**", "test-results/**", "bench/results/**"] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  { languageOptions: { globals: { ...globals.node } } },
  {
    rules: {
      // `_name` marks what a destructuring leaves out or a signature must accept.
      "@typescript-eslint/no-unused-vars": [
        "error",
        {
          argsIgnorePattern: "^_",
          varsIgnorePattern: "^_",
          caughtErrorsIgnorePattern: "^_",
          ignoreRestSiblings: true,
        },
      ],
      // Terminal and card text is escaped by matching control characters on purpose (src/text/).
      "no-control-regex": "off",
      // `let x = fallback; try { x = … } catch {}` reads better than the alternatives this rule pushes.
      "no-useless-assignment": "off",
    },
  },
  // Tests and benchmarks read JSON from processes and servers whose shape the assertions check.
  { files: ["test/**/*.ts", "bench/**/*.ts"], rules: { "@typescript-eslint/no-explicit-any": "off" } },
  {
    files: ["src/**/*.ts"],
    plugins: { "import-x": importX },
    settings: {
      ...importX.flatConfigs.typescript.settings,
      "import-x/resolver-next": [createTypeScriptImportResolver()],
    },
    rules: { "import-x/no-cycle": "error", "import-x/no-duplicates": "error" },
  },
);
