// typescript-eslint's type-checked recommended rules over the sources, tests and benchmarks (make lint). Formatting is
// Prettier's (.prettierrc.json), not ESLint's. Rules relaxed here say why.
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['dist/**', 'node_modules/**', 'coverage/**', 'src/runtime/sandbox-code/**', 'src/runtime/prelude-bundle.ts', '**/*.cjs', '**/*.mjs', '**/*.js'] },
  js.configs.recommended,
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: { parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname } },
  },
);
