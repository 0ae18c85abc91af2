// One jest project per test tier, so a tier runs alone (`jest --selectProjects unit`) and every line of output says
// which tier it came from. ts-jest's ESM preset: tests import the TypeScript sources directly, as Node would run them.
//   unit         no services: pure logic, fakes for what a unit does not own; seconds (make test-unit)
//   integration  a real etcd (started by the global setup) and real HTTP(S) servers on loopback
//   acceptance   the official Basis Theory SDKs against a real tokenvault
//   envtest      a real kube-apiserver (each file starts its own control plane), kubectl and helm
//   browser      headless Chromium (test/support/browser.ts) driving pages on another origin against a real tokenvault
const shared = {
  preset: 'ts-jest/presets/default-esm',
  testEnvironment: 'node',
  extensionsToTreatAsEsm: ['.ts'],
  moduleNameMapper: { '^(\\.{1,2}/.*)\\.js$': '$1' },
  transform: { '^.+\\.ts$': ['ts-jest', { useESM: true, tsconfig: 'tsconfig.json' }] },
};
// The tiers that need etcd; the setup starts one for the whole run (a second project's setup finds it running).
const withEtcd = { globalSetup: './test/support/global-setup.ts', globalTeardown: './test/support/global-teardown.ts' };

/** @param {string} name @param {object} [extra] */
const tier = (name, extra = {}) => ({
  ...shared,
  ...extra,
  displayName: name,
  testMatch: [`<rootDir>/test/${name}/**/*.test.ts`],
});

/** @type {import('jest').Config} */
export default {
  // Room for a test that starts processes (tokenvault dev, an API, a worker) on a loaded 2-CPU machine; a hung test
  // still fails, only later.
  testTimeout: 60000,
  reporters: ['default', './test/support/summary-reporter.js'],
  projects: [tier('unit'), tier('integration', withEtcd), tier('acceptance', withEtcd), tier('envtest', withEtcd), tier('browser', withEtcd)],
};
