// Jest global setup: gives every test worker an etcd to talk to through TOKENVAULT_TEST_ETCD_ENDPOINTS
// (comma-separated client URLs). An etcd named by the environment is used as is; otherwise one is started here
// (about a second) and stopped by global-teardown.ts. Workers inherit process.env from this process.

import { createRequire } from 'node:module';
import type { EtcdProcess } from './etcd.js';

export default async function globalSetup(): Promise<void> {
  if (process.env.TOKENVAULT_TEST_ETCD_ENDPOINTS) return;
  const etcd = await loadHarness().startEtcd();
  // Read by global-teardown.ts, which runs in this same process.
  (globalThis as { __tokenvaultEtcd?: EtcdProcess }).__tokenvaultEtcd = etcd;
  process.env.TOKENVAULT_TEST_ETCD_ENDPOINTS = etcd.endpoint;
}

// Jest loads this file with plain Node (through a require hook that compiles TypeScript), not through its own module
// system, so `import './etcd.js'` would look for a .js file that does not exist (moduleNameMapper does not apply
// here). Requiring the .ts file by its real name goes through the same hook.
function loadHarness(): typeof import('./etcd.js') {
  return createRequire(import.meta.url)('./etcd.ts') as typeof import('./etcd.js');
}
