// ts-jest's ESM preset: tests import the TypeScript sources directly, as Node would run them.
/** @type {import('jest').Config} */
export default {
  preset: 'ts-jest/presets/default-esm',
  testEnvironment: 'node',
  extensionsToTreatAsEsm: ['.ts'],
  moduleNameMapper: { '^(\\.{1,2}/.*)\\.js$': '$1' },
  transform: { '^.+\\.ts$': ['ts-jest', { useESM: true, tsconfig: 'tsconfig.json' }] },
  globalSetup: './test/support/global-setup.ts',
  globalTeardown: './test/support/global-teardown.ts',
  testTimeout: 30000,
  reporters: ['default', './test/support/summary-reporter.js'],
  testMatch: ['<rootDir>/test/**/*.test.ts'],
};
