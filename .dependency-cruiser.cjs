// The layers of src/, checked by `make lint` (dependency-cruiser). Arrows point down only:
//   cli → server → controller | http → domain → (auth, expressions, crypto, runtime client, proxy, batching) → store
//   → validation, errors, config, observability
// Each rule says why it exists; a violation fails lint with the rule's name.
/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [
    {
      name: 'no-circular',
      severity: 'error',
      comment: 'An import cycle makes load order matter and hides which module owns a concept.',
      from: { path: '^src' },
      to: { circular: true },
    },
    {
      name: 'domain-not-to-http',
      severity: 'error',
      comment: 'Domain services take and return plain values; HTTP (express, req/res, problem writing) stays in src/http.',
      from: { path: '^src/domain' },
      to: { path: '^src/(http|server|controller|cli)' },
    },
    {
      name: 'store-is-the-bottom',
      severity: 'error',
      comment: 'The store knows keys and bytes, not concepts: nothing above it may be imported by it.',
      from: { path: '^src/store' },
      to: { path: '^src/(domain|http|server|controller|runtime|proxy|auth|crypto|expressions|cli)' },
    },
    {
      name: 'errors-are-a-leaf',
      severity: 'error',
      comment: 'The one error registry is imported by every layer, so it imports none.',
      from: { path: '^src/errors' },
      to: { path: '^src/(?!errors)' },
    },
    {
      name: 'config-is-read-not-run',
      severity: 'error',
      comment: 'The typed config parses settings (with the key and store parsers); it never reaches services or servers.',
      from: { path: '^src/config' },
      to: { path: '^src/(domain|http|server|controller|runtime|proxy|expressions|cli)' },
    },
    {
      name: 'crypto-is-a-library',
      severity: 'error',
      comment: 'Encryption, key rings and rotation take keys and a store as arguments; commands and config live in src/server.',
      from: { path: '^src/crypto' },
      to: { path: '^src/(config|server|http|domain|controller|runtime|cli)' },
    },
    {
      name: 'controller-through-the-api',
      severity: 'error',
      comment: 'The controller is an API client (docs/adr/0002): it never reaches the store, crypto or domain services.',
      from: { path: '^src/controller' },
      to: { path: '^src/(store|crypto|domain|http|runtime|proxy|expressions)' },
    },
    {
      name: 'worker-side-holds-nothing',
      severity: 'error',
      comment: 'The worker runs tenant code: it must not link the store, keys, domain services or the API client (docs/adr/0001).',
      from: { path: '^src/runtime/worker' },
      to: { path: '^src/(runtime/client|domain|http|store|crypto|auth|controller|server)' },
    },
    {
      name: 'api-side-never-loads-the-sandbox',
      severity: 'error',
      comment: 'The API talks to workers over HTTP (src/runtime/client); it never runs tenant code in its own process.',
      from: { path: '^src/(domain|http|runtime/client)' },
      to: { path: '^src/runtime/worker' },
    },
    {
      name: 'http-only-in-http',
      severity: 'error',
      comment: 'express is the HTTP layer: only src/http (and the worker and metrics servers it builds) import it.',
      from: { path: '^src', pathNot: '^src/http' },
      to: { path: '^node_modules/express' },
    },
    {
      name: 'no-orphans',
      severity: 'error',
      comment: 'A module nothing imports is dead code (the CLI is the entry point).',
      from: { orphan: true, path: '^src', pathNot: ['^src/cli\\.ts$', '\\.d\\.ts$'] },
      to: {},
    },
    {
      name: 'tests-use-the-seams',
      severity: 'error',
      comment: 'Source never imports tests or test support.',
      from: { path: '^src' },
      to: { path: '^test' },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: { exportsFields: ['exports'], conditionNames: ['import', 'require', 'node', 'default'], extensions: ['.ts', '.js'] },
    moduleSystems: ['es6', 'cjs'],
  },
};
