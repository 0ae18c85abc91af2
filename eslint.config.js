// typescript-eslint's type-checked recommended rules over the sources, tests and benchmarks (make lint). Formatting is
// Prettier's (.prettierrc.json), not ESLint's. Rules relaxed here say why.
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['dist/**', 'node_modules/**', 'coverage/**', 'src/runtime/worker/prelude-bundle.ts', '**/*.cjs', '**/*.mjs', '**/*.js', '!src/runtime/worker/sandbox-code/*.js'] },
  js.configs.recommended,
  {
    files: ['**/*.ts'],
    extends: [...tseslint.configs.recommendedTypeChecked],
    languageOptions: { parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname } },
    rules: {
      // Methods that implement a Promise-returning interface (the memory store, liquidjs' file system) are async so that
      // a throw becomes a rejection, as callers of the interface expect, even when they await nothing themselves.
      '@typescript-eslint/require-await': 'off',
      // Destructuring a field away (`const { key: _key, ...rest } = record`) is how a secret is left out of an answer.
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_', ignoreRestSiblings: true }],
    },
  },
  {
    // The plain JavaScript that runs inside the reactor isolates: ES modules (hack/build-sandbox.mjs bundles them as
    // ESM), whose only globals are the language's own. An isolate has no Node and no browser, so neither set of
    // globals is declared and using one is an error, as in their tsconfig.json.
    files: ['src/runtime/worker/sandbox-code/**/*.js'],
    // ecmaVersion declares the language's globals of that version, and nothing else.
    languageOptions: { ecmaVersion: 2022, sourceType: 'module', globals: {} },
  },
  {
    // Tests read answers as the SDKs and HTTP clients hand them over (parsed JSON, `any`), and assert on their shape:
    // the unsafe-any rules would only add casts that assert nothing.
    files: ['test/**/*.ts', 'bench/**/*.ts'],
    rules: {
      '@typescript-eslint/no-explicit-any': 'off',
      '@typescript-eslint/no-unsafe-assignment': 'off',
      '@typescript-eslint/no-unsafe-member-access': 'off',
      '@typescript-eslint/no-unsafe-argument': 'off',
      '@typescript-eslint/no-unsafe-call': 'off',
      '@typescript-eslint/no-unsafe-return': 'off',
      // The harnesses hand back closures as object properties ({ stop, log }), not methods that need `this`.
      '@typescript-eslint/unbound-method': 'off',
    },
  },
);
