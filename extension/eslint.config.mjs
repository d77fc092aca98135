// ESLint (flat config) for the extension's TypeScript: `jlpm lint` (CI runs it with `jlpm
// typecheck`, i.e. `tsc --noEmit`). A small rule set on purpose; each rule catches a kind of bug
// this code can have, none is about layout:
//  - eslint's and typescript-eslint's `recommended` sets: the common baseline (unused
//    variables, `any` leaking into the API types, `@ts-ignore` without a reason, ...).
//  - no-floating-promises (type-aware): a Poll tick or click handler that drops a promise
//    drops its error too; write `void promise` where dropping it is intended.
//  - no-misused-promises (only where a promise is passed as a condition or spread): an
//    `if (asyncFn())` is always true. Async click handlers (`onclick = async () => ...`) are
//    fine in the DOM, so void-return checks are off.
//  - eqeqeq: the server sends null, 0 and missing fields with different meanings (progress 0
//    is not "no progress yet"); `==` would blur them.
//  - curly: a guard clause without braces is where the second statement gets added wrongly.
import js from '@eslint/js';
import { defineConfig } from 'eslint/config';
import tseslint from 'typescript-eslint';

export default defineConfig(
  { ignores: ['lib/', 'node_modules/', 'ui-tests/', '*.js', '*.mjs'] },
  js.configs.recommended,
  tseslint.configs.recommended,
  {
    files: ['src/**/*.ts'],
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname }
    },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-misused-promises': ['error', { checksVoidReturn: false }],
      eqeqeq: ['error', 'always'],
      curly: ['error', 'all']
    }
  }
);
