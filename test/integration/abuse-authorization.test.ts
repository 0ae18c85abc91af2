// An attacker holding ordinary keys tries to get more than they hold: one test per point of "a caller gets at most
// what it already has" (docs/security.md, "Keys and what they can do" and "Revocation").
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { ApplicationDirectory } from '../../src/domain/applications/directory.js';
import { BtKeys } from '../../src/domain/reactors/bt-keys.js';
import type { Store } from '../../src/store/store.js';
import {
  createApplication,
  createTenant,
  spawnApi,
  startTestApi,
  openTestStore,
  testStoreUrl,
  type ChildApi,
  type TestApi,
} from '../support/api.js';
import { call, client } from '../support/http.js';

const MERGE = { 'Content-Type': 'application/merge-patch+json' };
const SSN = '123-45-6789';
const everything = (transform: string, permissions: string[]) => [
  { description: 'all', priority: 1, container: '/', transform, permissions },
];

let api: TestApi;
let tenantId: string;
let managementKey: string;

beforeAll(async () => {
  api = await startTestApi();
  ({ tenantId, managementKey } = await createTenant(api.url, api.operatorKey));
});

afterAll(async () => {
  await api?.close();
});

const app = (body: Record<string, unknown>) => createApplication(api.url, managementKey, { name: 'abuse', ...body });

test('1. token writes cannot widen who sees plaintext; a public key writes only its own tokens', async () => {
  const writer = client(api.url, (await app({ type: 'private', permissions: ['token:create'] })).key);
  // A reader that sees /pci/ masked and /general/ in plaintext, and an updater that may update but only reads masked.
  const reader = client(
    api.url,
    (
      await app({
        type: 'private',
        rules: [
          {
            description: 'pci masked',
            priority: 1,
            container: '/pci/',
            transform: 'mask',
            permissions: ['token:read'],
          },
          {
            description: 'general revealed',
            priority: 2,
            container: '/general/',
            transform: 'reveal',
            permissions: ['token:read'],
          },
        ],
      })
    ).key,
  );
  const updater = client(
    api.url,
    (await app({ type: 'private', rules: everything('mask', ['token:read', 'token:update']) })).key,
  );
  const owner = client(
    api.url,
    (await app({ type: 'private', rules: everything('reveal', ['token:read', 'token:update']) })).key,
  );
  const browser = client(api.url, (await app({ type: 'public', permissions: ['token:create', 'token:update'] })).key);

  const token = (
    await writer.post('/tokens', { body: { type: 'social_security_number', data: SSN, containers: ['/pci/'] } })
  ).body;
  expect((await reader.get(`/tokens/${token.id}`)).body.data).toBe('XXX-XX-6789');

  for (const patch of [
    { mask: '{{ data }}' },
    { containers: ['/general/'] },
    { fingerprint_expression: '{{ data }}' },
    { search_indexes: ['{{ data }}'] },
  ]) {
    const answer = await updater.patch(`/tokens/${token.id}`, { body: patch, headers: MERGE });
    expect([Object.keys(patch)[0], answer.status]).toEqual([Object.keys(patch)[0], 403]);
  }
  expect((await reader.get(`/tokens/${token.id}`)).body.data).toBe('XXX-XX-6789');

  // A public key may not overwrite a token it did not create, nor change a visibility field of its own.
  expect((await browser.patch(`/tokens/${token.id}`, { body: { data: '000-00-0000' }, headers: MERGE })).status).toBe(
    403,
  );
  expect((await owner.get(`/tokens/${token.id}`)).body.data).toBe(SSN);
  const own = (await browser.post('/tokens', { body: { type: 'token', data: 'mine', containers: ['/pci/'] } })).body;
  expect(
    (await browser.patch(`/tokens/${own.id}`, { body: { data: 'still mine', metadata: { a: 'b' } }, headers: MERGE }))
      .status,
  ).toBe(200);
  expect((await browser.patch(`/tokens/${own.id}`, { body: { mask: '{{ data }}' }, headers: MERGE })).status).toBe(403);

  // A key that reads the plaintext where the token is and where it goes may change what others see.
  expect(
    (await owner.patch(`/tokens/${token.id}`, { body: { containers: ['/general/'] }, headers: MERGE })).status,
  ).toBe(200);
  expect((await reader.get(`/tokens/${token.id}`)).body.data).toBe(SSN);
});

test('2. a session gets a subset of its authorizer’s rights', async () => {
  const browser = client(api.url, (await app({ type: 'public', permissions: ['token:create'] })).key);
  const writer = client(api.url, (await app({ type: 'private', permissions: ['token:create'] })).key);
  const token = (await writer.post('/tokens', { body: { type: 'social_security_number', data: SSN } })).body;
  const reveal = { nonce: '', rules: everything('reveal', ['token:read', 'token:use']) };

  const reports = client(api.url, (await app({ type: 'management', permissions: ['report:read'] })).key);
  const creator = client(api.url, (await app({ type: 'private', permissions: ['token:create'] })).key);
  for (const authorizer of [reports, creator]) {
    const session = (await browser.post('/sessions')).body;
    const answer = await authorizer.post('/sessions/authorize', { body: { ...reveal, nonce: session.nonce } });
    expect(answer.status).toBe(403);
    expect((await client(api.url, session.session_key).get(`/tokens/${token.id}`)).status).toBe(403);
  }

  // A key that reads masked data can authorize reads, but the session sees no more than the key: masked.
  const masked = client(api.url, (await app({ type: 'private', permissions: ['token:read'] })).key);
  const session = (await browser.post('/sessions')).body;
  expect(
    (
      await masked.post('/sessions/authorize', {
        body: { nonce: session.nonce, rules: everything('reveal', ['token:read']) },
      })
    ).status,
  ).toBe(204);
  expect((await client(api.url, session.session_key).get(`/tokens/${token.id}`)).body.data).toBe('XXX-XX-6789');
  expect(
    (await client(api.url, session.session_key).post('/detokenize', { body: { x: `{{ ${token.id} }}` } })).status,
  ).toBe(403);

  // Expiry is capped at the documented maximum (24 hours from the session's creation by default).
  const late = (await browser.post('/sessions')).body;
  const tooLong = await masked.post('/sessions/authorize', {
    body: {
      nonce: late.nonce,
      permissions: ['token:read'],
      expires_at: new Date(Date.now() + 25 * 3600_000).toISOString(),
    },
  });
  expect(tooLong.status).toBe(400);
  expect(tooLong.body.errors.expires_at).toBeTruthy();
});

test('3. deduplication answers a key that cannot read the existing token with its id and type only', async () => {
  const writer = client(api.url, (await app({ type: 'private', permissions: ['token:create', 'token:read'] })).key);
  const browser = client(api.url, (await app({ type: 'public', permissions: ['token:create'] })).key);
  const existing = (
    await writer.post('/tokens', {
      body: {
        type: 'social_security_number',
        data: '987-65-4321',
        metadata: { customer: 'c-42', email: 'ada@example.com' },
        deduplicate_token: true,
      },
    })
  ).body;
  const answer = await browser.post('/tokens', {
    body: { type: 'social_security_number', data: '987-65-4321', deduplicate_token: true },
  });
  expect(answer.status).toBe(201);
  // _extras says what the id already says (the writer did not get a new token), as Basis Theory's answer does.
  expect(answer.body).toEqual({ id: existing.id, type: 'social_security_number', _extras: { deduplicated: true } });
  // What its own read shows of that token: nothing.
  expect((await browser.get(`/tokens/${existing.id}`)).status).toBe(403);
  // A key that may read it sees it as its read would.
  const again = await writer.post('/tokens', {
    body: { type: 'social_security_number', data: '987-65-4321', deduplicate_token: true },
  });
  expect(again.body).toMatchObject({ id: existing.id, metadata: { customer: 'c-42' }, data: 'XXX-XX-4321' });
});

test('4. the operator key with BT-TENANT-ID administers but does not touch token data', async () => {
  const writer = client(api.url, (await app({ type: 'private', permissions: ['token:create'] })).key);
  const token = (await writer.post('/tokens', { body: { type: 'token', data: 'secret' } })).body;
  const operator = (method: string, path: string, body?: unknown) =>
    call(api.url, method, path, { key: api.operatorKey, body, headers: { 'BT-TENANT-ID': tenantId } });

  expect((await operator('GET', `/tokens/${token.id}`)).status).toBe(403);
  expect((await operator('GET', '/tokens')).status).toBe(403);
  expect((await operator('POST', '/tokens', { type: 'token', data: 'x' })).status).toBe(403);
  expect((await operator('POST', '/detokenize', { x: `{{ ${token.id} }}` })).status).toBe(403);
  expect((await operator('POST', `/reactors/${token.id}/react`, { args: {} })).status).toBe(403);
  expect((await operator('POST', '/sessions/authorize', { nonce: 'n', permissions: ['token:read'] })).status).toBe(403);
  // It still administers the tenant.
  expect(
    (await operator('POST', '/applications', { name: 'by operator', type: 'private', permissions: ['token:read'] }))
      .status,
  ).toBe(201);
  expect((await operator('GET', '/tenants/self')).status).toBe(200);
});

describe('5. revocation reaches every replica within 5 s', () => {
  let one: ChildApi;
  let two: ChildApi;
  let store: Store;
  let directory: ApplicationDirectory;
  let mgmt: string;
  let tenant: string;
  let tokenId: string;

  beforeAll(async () => {
    const env = { TOKENVAULT_STORE: testStoreUrl(), TOKENVAULT_OPERATOR_KEY: api.operatorKey };
    [one, two] = await Promise.all([spawnApi(['api'], env), spawnApi(['api'], env)]);
    ({ managementKey: mgmt, tenantId: tenant } = await createTenant(one.url, api.operatorKey));
    const writer = await createApplication(one.url, mgmt, {
      name: 'writer',
      type: 'private',
      permissions: ['token:create'],
    });
    tokenId = (await client(one.url, writer.key).post('/tokens', { body: { type: 'token', data: 'secret' } })).body.id;
    store = openTestStore();
    directory = new ApplicationDirectory(store, 300);
  }, 30_000);

  afterAll(async () => {
    await directory?.stop();
    await store?.close();
    await Promise.all([one?.stop(), two?.stop()]);
  });

  /** Milliseconds until `key` is refused with 401 on replica two (polled every 50 ms, at most 10 s). */
  async function refusedAfter(key: string, since: number): Promise<number> {
    for (;;) {
      const status = (await client(two.url, key).get(`/tokens/${tokenId}`)).status;
      if (status === 401) return Date.now() - since;
      if (Date.now() - since > 10_000) return Infinity;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }

  async function authorizedSession(authorizerKey: string): Promise<string> {
    const browser = await createApplication(one.url, mgmt, {
      name: 'web',
      type: 'public',
      permissions: ['token:create'],
    });
    const session = (await client(one.url, browser.key).post('/sessions')).body;
    expect(
      (
        await client(one.url, authorizerKey).post('/sessions/authorize', {
          body: { nonce: session.nonce, permissions: ['token:read'] },
        })
      ).status,
    ).toBe(204);
    // Warm replica two: the refusal must come from a watch, not from a cold read.
    expect((await client(two.url, session.session_key).get(`/tokens/${tokenId}`)).status).toBe(200);
    return session.session_key;
  }

  const changes: Array<[string, (id: string) => Promise<unknown>]> = [
    [
      'its permissions changed',
      (id) =>
        client(one.url, mgmt).put(`/applications/${id}`, {
          body: { name: 'changed', permissions: ['token:read', 'token:create'] },
        }),
    ],
    ['its key regenerated', (id) => client(one.url, mgmt).post(`/applications/${id}/regenerate`)],
    ['it is deleted', (id) => client(one.url, mgmt).delete(`/applications/${id}`)],
  ];

  test("an application's narrowed permissions apply on the other replica", async () => {
    const reader = await createApplication(one.url, mgmt, {
      name: 'reader',
      type: 'private',
      permissions: ['token:read'],
    });
    expect((await client(two.url, reader.key).get(`/tokens/${tokenId}`)).status).toBe(200);
    const since = Date.now();
    await client(one.url, mgmt).put(`/applications/${reader.id}`, {
      body: { name: 'reader', permissions: ['token:create'] },
    });
    let status = 200;
    while (status !== 403 && Date.now() - since < 10_000) {
      status = (await client(two.url, reader.key).get(`/tokens/${tokenId}`)).status;
      if (status !== 403) await new Promise((resolve) => setTimeout(resolve, 50));
    }
    expect(status).toBe(403);
    expect(Date.now() - since).toBeLessThan(5000);
  });

  test.each(changes)('a session ends when its authorizer has %s', async (_name, change) => {
    const authorizer = await createApplication(one.url, mgmt, {
      name: 'server',
      type: 'private',
      permissions: ['token:read'],
    });
    const session = await authorizedSession(authorizer.key);
    const since = Date.now();
    await change(authorizer.id);
    expect(await refusedAfter(session, since)).toBeLessThan(5000);
  });

  test('deleting one application key revokes it and the sessions it authorized on the other replica, and nothing else', async () => {
    const authorizer = await createApplication(one.url, mgmt, {
      name: 'server',
      type: 'private',
      permissions: ['token:read'],
    });
    const [first] = (await client(one.url, mgmt).get(`/applications/${authorizer.id}/keys`)).body as Array<{
      id: string;
    }>;
    const second = (await client(one.url, mgmt).post(`/applications/${authorizer.id}/keys`)).body;
    const third = (await client(one.url, mgmt).post(`/applications/${authorizer.id}/keys`)).body;
    const byFirst = await authorizedSession(authorizer.key);
    const bySecond = await authorizedSession(second.key);
    // Warm replica two for the keys themselves too.
    for (const key of [authorizer.key, second.key, third.key]) {
      expect((await client(two.url, key).get(`/tokens/${tokenId}`)).status).toBe(200);
    }
    // Another key's deletion ends neither the first key nor its session.
    await client(one.url, mgmt).delete(`/applications/${authorizer.id}/keys/${third.id}`);
    expect(await refusedAfter(third.key, Date.now())).toBeLessThan(5000);
    expect((await client(two.url, authorizer.key).get(`/tokens/${tokenId}`)).status).toBe(200);
    expect((await client(two.url, byFirst).get(`/tokens/${tokenId}`)).status).toBe(200);

    const since = Date.now();
    await client(one.url, mgmt).delete(`/applications/${authorizer.id}/keys/${first.id}`);
    expect(await refusedAfter(authorizer.key, since)).toBeLessThan(5000);
    expect(await refusedAfter(byFirst, since)).toBeLessThan(5000);
    expect((await client(two.url, second.key).get(`/tokens/${tokenId}`)).status).toBe(200);
    expect((await client(two.url, bySecond).get(`/tokens/${tokenId}`)).status).toBe(200);
  });

  test.each(changes)('a minted reactor key ends when its application has %s', async (name, change) => {
    const reactorApp = await createApplication(one.url, mgmt, {
      name: 'reactor app',
      type: 'private',
      permissions: ['token:read'],
    });
    const minted = new BtKeys(store, directory);
    const key = await minted.keyFor(tenant, reactorApp.id);
    expect((await client(two.url, key).get(`/tokens/${tokenId}`)).status).toBe(200);
    const since = Date.now();
    await change(reactorApp.id);
    expect(await refusedAfter(key, since)).toBeLessThan(5000);
    // The next invocation gets a key with the application's current rights, if it still exists.
    if (name !== 'it is deleted') {
      let fresh = key;
      for (const deadline = Date.now() + 5000; fresh === key && Date.now() < deadline;) {
        fresh = await minted.keyFor(tenant, reactorApp.id);
        if (fresh === key) await new Promise((resolve) => setTimeout(resolve, 50));
      }
      expect(fresh).not.toBe(key);
      expect((await client(two.url, fresh).get(`/tokens/${tokenId}`)).status).toBe(200);
    }
  });
});

describe('6. a queued asynchronous reactor request runs with its key’s rights when it runs', () => {
  let queued: TestApi;
  let mgmt: string;

  beforeAll(async () => {
    // One run at a time, so a second request waits in the queue behind a slow one.
    queued = await startTestApi({ TOKENVAULT_ASYNC_CONCURRENCY: '1' });
    ({ managementKey: mgmt } = await createTenant(queued.url, queued.operatorKey));
  }, 30_000);

  afterAll(async () => {
    await queued?.close();
  });

  /** A slow request, then an echo of `args` queued behind it; `change` runs while the echo waits. */
  async function echoAfterChange(key: string, args: unknown, change: () => Promise<unknown>) {
    const admin = client(queued.url, mgmt);
    const reactor = async (code: string) =>
      (await admin.post('/reactors', { body: { name: 'r', configuration: {}, code } })).body.id as string;
    const slow = await reactor(
      'module.exports = async () => { await new Promise((r) => setTimeout(r, 1500)); return {}; };',
    );
    const echo = await reactor('module.exports = async (req) => ({ raw: req.args });');
    const caller = client(queued.url, key);
    expect((await caller.post(`/reactors/${slow}/react-async`, { body: { args: {} } })).status).toBe(202);
    const submitted = await caller.post(`/reactors/${echo}/react-async`, { body: { args } });
    expect(submitted.status).toBe(202);
    await change();
    const path = `/reactors/${echo}/results/${submitted.body.asyncReactorRequestId}`;
    for (let i = 0; i < 100; i++) {
      const answer = await caller.get(path);
      if (answer.status !== 200 || answer.body.status !== 'pending') return answer;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    throw new Error('the queued request never ran');
  }

  test('rights narrowed while it waits apply to it', async () => {
    const server = await createApplication(queued.url, mgmt, {
      name: 'server',
      type: 'private',
      rules: everything('reveal', ['token:create', 'token:use']),
    });
    const token = await client(queued.url, server.key).post('/tokens', {
      body: { type: 'social_security_number', data: SSN },
    });
    expect(token.status).toBe(201);
    const answer = await echoAfterChange(server.key, { ssn: `{{ ${token.body.id} }}` }, async () => {
      const narrowed = await client(queued.url, mgmt).put(`/applications/${server.id}`, {
        body: { name: 'server', rules: everything('mask', ['token:create', 'token:use']) },
      });
      expect(narrowed.status).toBe(200);
    });
    expect([answer.status, answer.body.status, answer.body.result]).toEqual([
      200,
      'completed',
      { raw: { ssn: 'XXX-XX-6789' } },
    ]);
  }, 30_000);
});
