// Jest global setup: gives every test worker an etcd and a PostgreSQL to talk to, through
// TOKENVAULT_TEST_ETCD_ENDPOINTS (comma-separated client URLs) and TOKENVAULT_TEST_POSTGRES_URL (a postgres:// URL of a
// database the tests may fill; the role in it may create more databases). One named by the environment is used as
// is; otherwise each is started here (together, a few seconds) and stopped by global-teardown.ts. Workers inherit
// process.env from this process. Both are started whichever store the run's APIs use (TOKENVAULT_TEST_STORE,
// test/support/api.ts): the store contract tests run on each.

import { createRequire } from 'node:module';
import type { EtcdProcess } from './etcd.js';
import type { PostgresProcess } from './postgres.js';

export default async function globalSetup(): Promise<void> {
  const globals = globalThis as { __tokenvaultEtcd?: EtcdProcess; __tokenvaultPostgres?: PostgresProcess };
  const [etcd, postgres] = await Promise.allSettled([
    process.env.TOKENVAULT_TEST_ETCD_ENDPOINTS ? undefined : load<typeof import('./etcd.js')>('./etcd.ts').startEtcd(),
    process.env.TOKENVAULT_TEST_POSTGRES_URL
      ? undefined
      : load<typeof import('./postgres.js')>('./postgres.ts').startPostgres(),
  ]);
  // Read by global-teardown.ts, which runs in this same process.
  if (etcd.status === 'fulfilled' && etcd.value) {
    globals.__tokenvaultEtcd = etcd.value;
    process.env.TOKENVAULT_TEST_ETCD_ENDPOINTS = etcd.value.endpoint;
  }
  if (postgres.status === 'fulfilled' && postgres.value) {
    globals.__tokenvaultPostgres = postgres.value;
    process.env.TOKENVAULT_TEST_POSTGRES_URL = postgres.value.url;
  }
  const failed = [etcd, postgres].find((result) => result.status === 'rejected');
  if (failed) {
    // Jest runs no teardown when the setup throws: stop what did start.
    await globals.__tokenvaultEtcd?.stop();
    await globals.__tokenvaultPostgres?.stop();
    throw failed.reason;
  }
}

// Jest loads this file with plain Node (through a require hook that compiles TypeScript), not through its own module
// system, so `import './etcd.js'` would look for a .js file that does not exist (moduleNameMapper does not apply
// here). Requiring the .ts file by its real name goes through the same hook.
function load<T>(file: string): T {
  return createRequire(import.meta.url)(file) as T;
}
