// Jest global teardown: stops the etcd and the PostgreSQL that global-setup.ts started, if it started them.

import type { EtcdProcess } from './etcd.js';
import type { PostgresProcess } from './postgres.js';

export default async function globalTeardown(): Promise<void> {
  // Set by global-setup.ts, which runs in this same process.
  const globals = globalThis as { __tokenvaultEtcd?: EtcdProcess; __tokenvaultPostgres?: PostgresProcess };
  const { __tokenvaultEtcd: etcd, __tokenvaultPostgres: postgres } = globals;
  globals.__tokenvaultEtcd = undefined;
  globals.__tokenvaultPostgres = undefined;
  if (etcd) delete process.env.TOKENVAULT_TEST_ETCD_ENDPOINTS;
  if (postgres) delete process.env.TOKENVAULT_TEST_POSTGRES_URL;
  await Promise.all([etcd?.stop(), postgres?.stop()]);
}
