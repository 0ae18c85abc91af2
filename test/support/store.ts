// Store checks shared by the etcd TLS tests.
import { openStore } from '../../src/store/open.js';

/** Whether the store reaches the etcd at `endpoint` (https) with these TLS files. */
export async function storeReaches(
  endpoint: string,
  tls: { caFile?: string; certFile?: string; keyFile?: string },
): Promise<boolean> {
  const store = openStore({ kind: 'etcd', endpoints: [`https://${endpoint}`], tls });
  try {
    await store.ping();
    return true;
  } catch {
    return false;
  } finally {
    await store.close();
  }
}
