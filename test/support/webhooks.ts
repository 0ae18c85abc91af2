// What the webhook delivery tests share: an API on a store of its own (every API process on a store serves its
// outboxes, with its own settings): a new etcd, or with TOKENVAULT_TEST_STORE=postgres a new database on the test
// PostgreSQL; trusting the loopback receivers' test CA; and a tenant with one webhook on token.created and a key that
// creates tokens.
import { expect } from '@jest/globals';
import { openStore } from '../../src/store/open.js';
import type { Store } from '../../src/store/store.js';
import { createApplication, createTenant, startOwnTestStore, startTestApi, type TestApi } from './api.js';
import { client } from './http.js';
import { testCertificates } from './https.js';

export interface WebhookApi {
  api: TestApi;
  /** A client of the API's store, to look at outboxes and marks. */
  store: Store;
  /** Another client of the API's store (closed by the caller), as a second process would have. */
  openStore(): Store;
  close(): Promise<void>;
}

/** `env`: the webhook settings under test. */
export async function startWebhookApi(env: Record<string, string>): Promise<WebhookApi> {
  const { caFile } = await testCertificates();
  const own = await startOwnTestStore();
  const store = openStore(own.spec);
  const api = await startTestApi({
    TOKENVAULT_STORE: own.url,
    TOKENVAULT_PROXY_ALLOWED_HOSTS: 'localhost',
    TOKENVAULT_PROXY_CA_FILE: caFile,
    ...env,
  });
  return {
    api,
    store,
    openStore: () => openStore(own.spec),
    async close() {
      await api.close();
      await store.close();
      await own.stop();
    },
  };
}

/** A new tenant whose webhook on token.created calls `url`, with a management client and a token writer. */
export async function tenantWithHook(api: TestApi, url: string) {
  const tenant = await createTenant(api.url, api.operatorKey);
  const hook = await client(api.url, tenant.managementKey).post('/webhooks', {
    body: { name: 'hook', url, events: ['token.created'] },
  });
  expect(hook.status).toBe(201);
  const writer = await createApplication(api.url, tenant.managementKey, {
    name: 'w',
    type: 'private',
    permissions: ['token:create'],
  });
  return {
    tenantId: tenant.tenantId,
    hookId: hook.body.id as string,
    mgmt: client(api.url, tenant.managementKey),
    tokens: client(api.url, writer.key),
  };
}
