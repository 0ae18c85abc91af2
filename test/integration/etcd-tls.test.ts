// Issue 12 point 12: the API talks to etcd over TLS with a client certificate, as the chart deploys it by default. A
// real etcd on loopback with --client-cert-auth and certificates made for this run (a CA, a server certificate and a
// client certificate signed by it); the API's store connects with TOKENVAULT_ETCD_CA_FILE / _CERT_FILE / _KEY_FILE,
// and is refused without its certificate, with a certificate of another CA, and in plaintext.
import { afterAll, beforeAll, expect, test } from '@jest/globals';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadConfig } from '../../src/config/config.js';
import { openStore } from '../../src/store/open.js';
import { createTenant, startTestApi, TEST_KEK, type TestApi } from '../support/api.js';
import { startTlsEtcd } from '../support/etcd.js';
import { testAuthority } from '../support/https.js';
import { storeReaches } from '../support/store.js';
import { call } from '../support/http.js';

const dir = mkdtempSync(join(tmpdir(), 'tokenvault-etcd-tls-'));
const file = (name: string, content: string) => {
  const path = join(dir, name);
  writeFileSync(path, content, { mode: 0o600 });
  return path;
};
let etcd: { endpoint: string; stop(): Promise<void> };
let endpoint: string;
let files: {
  ca: string;
  serverCert: string;
  serverKey: string;
  clientCert: string;
  clientKey: string;
  strangerCert: string;
  strangerKey: string;
};

beforeAll(async () => {
  const ours = await testAuthority('tokenvault etcd CA', 1);
  const server = await ours.leaf('etcd', { serverAuth: true, clientAuth: true });
  const client = await ours.leaf('tokenvault-api', { clientAuth: true });
  const stranger = await (await testAuthority('another CA', 1)).leaf('tokenvault-api', { clientAuth: true });
  files = {
    ca: file('ca.crt', ours.ca.cert),
    serverCert: file('server.crt', server.cert),
    serverKey: file('server.key', server.private),
    clientCert: file('client.crt', client.cert),
    clientKey: file('client.key', client.private),
    strangerCert: file('stranger.crt', stranger.cert),
    strangerKey: file('stranger.key', stranger.private),
  };
  etcd = await startTlsEtcd({ caFile: files.ca, certFile: files.serverCert, keyFile: files.serverKey }, (at) =>
    storeReaches(at, { caFile: files.ca, certFile: files.clientCert, keyFile: files.clientKey }),
  );
  endpoint = etcd.endpoint;
}, 40_000);

afterAll(async () => {
  await etcd?.stop();
  rmSync(dir, { recursive: true, force: true });
});

/** The store as the API opens it from its settings. */
function storeFrom(env: Record<string, string>) {
  return openStore(loadConfig({ env: { TOKENVAULT_KEK: TEST_KEK, ...env } }).store);
}

test('the API runs on etcd over TLS with its client certificate', async () => {
  let api: TestApi | undefined;
  try {
    api = await startTestApi({
      TOKENVAULT_STORE: `etcds://${endpoint}`,
      TOKENVAULT_ETCD_CA_FILE: files.ca,
      TOKENVAULT_ETCD_CERT_FILE: files.clientCert,
      TOKENVAULT_ETCD_KEY_FILE: files.clientKey,
    });
    expect((await call(api.url, 'GET', '/readyz')).status).toBe(200);
    const { managementKey } = await createTenant(api.url, api.operatorKey);
    expect(managementKey).toMatch(/^key_/);
  } finally {
    await api?.close();
  }
}, 30_000);

test.each([
  ['without a client certificate', { TOKENVAULT_STORE: 'etcds://ENDPOINT', TOKENVAULT_ETCD_CA_FILE: 'CA' }],
  [
    'with a client certificate of another CA',
    {
      TOKENVAULT_STORE: 'etcds://ENDPOINT',
      TOKENVAULT_ETCD_CA_FILE: 'CA',
      TOKENVAULT_ETCD_CERT_FILE: 'STRANGER_CERT',
      TOKENVAULT_ETCD_KEY_FILE: 'STRANGER_KEY',
    },
  ],
  ['in plaintext', { TOKENVAULT_STORE: 'etcd://ENDPOINT' }],
])(
  'etcd refuses the store %s',
  async (_name, template) => {
    const substitute: Record<string, string> = {
      ENDPOINT: endpoint,
      CA: files.ca,
      STRANGER_CERT: files.strangerCert,
      STRANGER_KEY: files.strangerKey,
    };
    const env = Object.fromEntries(
      Object.entries(template).map(([name, value]) => [
        name,
        value.replace(/ENDPOINT|STRANGER_CERT|STRANGER_KEY|CA/, (m) => substitute[m]),
      ]),
    );
    const store = storeFrom(env);
    try {
      await expect(store.ping()).rejects.toBeDefined();
      await expect(store.get('anything')).rejects.toBeDefined();
    } finally {
      await store.close();
    }
  },
  30_000,
);
