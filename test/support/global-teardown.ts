// Jest global teardown: stops the etcd that global-setup.ts started, if it started one.

import type { EtcdProcess } from './etcd.js';

export default async function globalTeardown(): Promise<void> {
  // Set by global-setup.ts, which runs in this same process.
  const globals = globalThis as { __tokenvaultEtcd?: EtcdProcess };
  const etcd = globals.__tokenvaultEtcd;
  if (!etcd) return;
  globals.__tokenvaultEtcd = undefined;
  delete process.env.TOKENVAULT_TEST_ETCD_ENDPOINTS;
  await etcd.stop();
}
