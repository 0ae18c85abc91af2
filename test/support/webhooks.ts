// What the webhook delivery tests share: an API on an etcd of its own (every API process on an etcd serves its
// outboxes, with its own settings), trusting the loopback receivers' test CA; and a tenant with one webhook on
// token.created and a key that creates tokens.
import { expect } from '@jest/globals';
import { EtcdStore } from '../../src/store/etcd.js';
import { createApplication, createTenant, startTestApi, type TestApi } from './api.js';
import { startEtcd } from './etcd.js';
import { client } from './http.js';
import { testCertificates } from './https.js';

export interface WebhookApi {
  api: TestApi;
  /** A client of the API's etcd, to look at outboxes and marks. */
  store: EtcdStore;
  endpoint: string;
  close(): Promise<void>;
}

/** `env`: the webhook settings under test. */
export async function startWebhookApi(env: Record<string, string>): Promise<WebhookApi> {
  const { caFile } = await testCertificates();
  const etcd = await startEtcd();
  const store = new EtcdStore({ endpoints: [etcd.endpoint] });
  const api = await startTestApi({
    TOKENVAULT_STORE: `etcd://${new URL(etcd.endpoint).host}`,
    TOKENVAULT_PROXY_ALLOWED_HOSTS: 'localhost',
    TOKENVAULT_PROXY_CA_FILE: caFile,
    ...env,
  });
  return {
    api,
    store,
    endpoint: etcd.endpoint,
    async close() {
      await api.close();
      await store.close();
      await etcd.stop();
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
