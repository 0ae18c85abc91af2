// The unit tier: test/unit only, with no services started (no etcd), so it runs anywhere in seconds.
import base from './jest.config.js';

const { globalSetup, globalTeardown, ...rest } = base;
void globalSetup;
void globalTeardown;

/** @type {import('jest').Config} */
export default { ...rest, testMatch: ['<rootDir>/test/unit/**/*.test.ts'] };
