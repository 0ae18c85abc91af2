// typescript-eslint's type-checked recommended rules over the sources, tests and benchmarks (make lint). Formatting is
// Prettier's (.prettierrc.json), not ESLint's. Rules relaxed here say why.
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['dist/**', 'node_modules/**', 'coverage/**', 'src/runtime/worker/sandbox-code/**', 'src/runtime/worker/prelude-bundle.ts', '**/*.cjs', '**/*.mjs', '**/*.js'] },
  js.configs.recommended,
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: { parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname } },
    rules: {
      // Methods that implement a Promise-returning interface (the memory store, liquidjs' file system) are async so that
      // a throw becomes a rejection, as callers of the interface expect, even when they await nothing themselves.
      '@typescript-eslint/require-await': 'off',
      // Destructuring a field away (`const { key: _key, ...rest } = record`) is how a secret is left out of an answer.
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_', ignoreRestSiblings: true }],
    },
  },
);
