// An attacker holding an ordinary key tries to parlay it into more: a session kept from before sessions recorded
// their authorizer, a management key that grants itself (or a new key) management rights it lacks, and a management
// key that attaches a powerful application to a reactor or proxy whose code or destination it controls
// (docs/security.md, "Keys and what they can do").
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { createHash } from 'node:crypto';
import { hashKey } from '../../src/auth/api-keys.js';
import type { KeyIndexEntry } from '../../src/auth/principal.js';
import { ApplicationDirectory } from '../../src/domain/applications/directory.js';
import { BtKeys } from '../../src/domain/reactors/bt-keys.js';
import { decode } from '../../src/store/codec.js';
import { keys } from '../../src/store/keys.js';
import {
  createApplication,
  createTenant,
  revealingApplication,
  startTestApi,
  openTestStore,
  type TestApi,
} from '../support/api.js';
import { call, client } from '../support/http.js';

const MERGE = { 'Content-Type': 'application/merge-patch+json' };

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

test('a session authorized before sessions recorded their authorizer is refused with 401', async () => {
  const writer = client(api.url, (await app({ type: 'private', permissions: ['token:create'] })).key);
  const token = (await writer.post('/tokens', { body: { type: 'token', data: 'secret' } })).body;
  const browser = client(api.url, (await app({ type: 'public', permissions: ['token:create'] })).key);
  const reader = client(api.url, (await app({ type: 'private', permissions: ['token:read'] })).key);
  const session = (await browser.post('/sessions')).body;
  expect(
    (await reader.post('/sessions/authorize', { body: { nonce: session.nonce, permissions: ['token:read'] } })).status,
  ).toBe(204);

  // Rewrite the session's key entry as the previous version stored it: grants, but no authorizer and no ceiling.
  const store = openTestStore();
  try {
    const entryKey = keys.apiKey(hashKey(session.session_key));
    const entry = JSON.parse((await store.get(entryKey))!.value) as Record<string, unknown>;
    expect(entry.ceiling).toBeDefined();
    const { parent: _parent, ceiling: _ceiling, ...legacy } = entry;
    await store.put(entryKey, JSON.stringify(legacy));
  } finally {
    await store.close();
  }
  const answer = await client(api.url, session.session_key).get(`/tokens/${token.id}`);
  expect(answer.status).toBe(401);
  expect(answer.body.detail).toMatch(/authorize a new session/);
  expect(answer.body.data).toBeUndefined();
});

describe('a management key grants no management permission it lacks', () => {
  test('application:create cannot mint a management key with more than the creator holds', async () => {
    const creator = client(
      api.url,
      (await app({ type: 'management', permissions: ['application:create', 'report:read'] })).key,
    );
    const bigger = await creator.post('/applications', {
      body: { name: 'root', type: 'management', permissions: ['tenant:delete', 'application:update'] },
    });
    expect(bigger.status).toBe(403);
    expect(bigger.body.detail).toMatch(/tenant:delete/);
    expect(bigger.body.key).toBeUndefined();
    // A subset of its own is fine, and so is a private key (issuing token access is what application:create is for).
    expect(
      (
        await creator.post('/applications', {
          body: { name: 'reports', type: 'management', permissions: ['report:read'] },
        })
      ).status,
    ).toBe(201);
    expect(
      (await creator.post('/applications', { body: { name: 'server', type: 'private', permissions: ['token:read'] } }))
        .status,
    ).toBe(201);
  });

  test('application:update cannot widen its own application nor take over a stronger key', async () => {
    const self = await app({ type: 'management', permissions: ['application:read', 'application:update'] });
    const updater = client(api.url, self.key);
    const widened = await updater.put(`/applications/${self.id}`, {
      body: { name: 'me', permissions: ['application:read', 'application:update', 'tenant:delete'] },
    });
    expect(widened.status).toBe(403);
    expect((await updater.get('/applications/key')).body.permissions).not.toContain('tenant:delete');

    const root = await app({
      type: 'management',
      permissions: ['tenant:delete', 'application:update', 'application:read'],
    });
    const taken = await updater.post(`/applications/${root.id}/regenerate`);
    expect(taken.status).toBe(403);
    expect(taken.body.key).toBeUndefined();
    expect((await client(api.url, root.key).get('/tenants/self')).status).not.toBe(401);
    // Nor narrow-then-own: rewriting a stronger application needs what it holds now.
    expect(
      (await updater.put(`/applications/${root.id}`, { body: { name: 'root', permissions: ['application:read'] } }))
        .status,
    ).toBe(403);
    // Its own rights, and private applications, stay in reach.
    expect(
      (
        await updater.put(`/applications/${self.id}`, {
          body: { name: 'me', permissions: ['application:read', 'application:update'] },
        })
      ).status,
    ).toBe(200);
    const server = await app({ type: 'private', permissions: ['token:read'] });
    expect((await updater.post(`/applications/${server.id}/regenerate`)).status).toBe(200);
  });
});

test('a key that expires cannot make, extend or take over an application that outlives it', async () => {
  const soon = new Date(Date.now() + 3600_000).toISOString();
  const later = new Date(Date.now() + 7200_000).toISOString();
  const temp = await app({
    type: 'management',
    permissions: ['application:create', 'application:update', 'application:read'],
    expires_at: soon,
  });
  const admin = client(api.url, temp.key);
  expect(
    (await admin.post('/applications', { body: { name: 'forever', type: 'private', permissions: ['token:read'] } }))
      .status,
  ).toBe(403);
  expect(
    (
      await admin.post('/applications', {
        body: { name: 'later', type: 'private', permissions: ['token:read'], expires_at: later },
      })
    ).status,
  ).toBe(403);
  const lifted = await admin.put(`/applications/${temp.id}`, {
    body: { name: 'me', permissions: ['application:create', 'application:update', 'application:read'] },
  });
  expect(lifted.status).toBe(403);
  expect((await admin.get('/applications/key')).body.expires_at).toBe(soon);
  const lasting = await app({ type: 'private', permissions: ['token:read'] });
  const taken = await admin.post(`/applications/${lasting.id}/regenerate`);
  expect(taken.status).toBe(403);
  expect(taken.body.key).toBeUndefined();
  // Within its own lifetime it works as before.
  expect(
    (
      await admin.post('/applications', {
        body: { name: 'brief', type: 'private', permissions: ['token:read'], expires_at: soon },
      })
    ).status,
  ).toBe(201);
});

test("idempotency replays a key's own answer only: another key with the same BT-IDEMPOTENCY-KEY and body gets its own", async () => {
  const first = client(api.url, (await app({ type: 'private', permissions: ['token:create', 'token:read'] })).key);
  const second = client(api.url, (await app({ type: 'private', permissions: ['token:create'] })).key);
  const headers = { 'BT-IDEMPOTENCY-KEY': 'shared-retry-key' };
  const body = { type: 'token', data: 'first secret', metadata: { who: 'first' } };
  const mine = await first.post('/tokens', { body, headers });
  expect(mine.status).toBe(201);
  expect((await first.post('/tokens', { body, headers })).body.id).toBe(mine.body.id);
  const theirs = await second.post('/tokens', { body, headers });
  expect(theirs.status).toBe(201);
  expect(theirs.body.id).not.toBe(mine.body.id);
  expect(theirs.body.data).toBeUndefined();
  // The same holds for application keys in a create answer: another management key never receives them.
  const other = client(api.url, (await app({ type: 'management', permissions: ['application:create'] })).key);
  const created = await client(api.url, managementKey).post('/applications', {
    body: { name: 'x', type: 'private', permissions: ['token:use'] },
    headers,
  });
  const replayed = await other.post('/applications', {
    body: { name: 'x', type: 'private', permissions: ['token:use'] },
    headers,
  });
  expect(replayed.body.id).not.toBe(created.body.id);
  expect(replayed.body.key).not.toBe(created.body.key);
});

test('an answer stored by an earlier version (no record of the rights) is still replayed to a retry after the upgrade', async () => {
  const writerApp = await app({ type: 'private', permissions: ['token:create'] });
  const writer = client(api.url, writerApp.key);
  const request = { body: { type: 'token', data: 'before the upgrade' }, headers: { 'BT-IDEMPOTENCY-KEY': 'upgrade' } };
  const first = await writer.post('/tokens', request);
  expect(first.status).toBe(201);
  // Rewrite the stored answer as the previous version stored it: without `rights`.
  const store = openTestStore();
  try {
    // Where src/domain/idempotency/service.ts keeps it: by the actor, the route and the BT-IDEMPOTENCY-KEY.
    const hash = createHash('sha256').update(`${writerApp.id}\nPOST /tokens\nupgrade`).digest('hex');
    const entry = (await store.get(keys.idempotency(tenantId, hash)))!;
    const { rights, ...legacy } = JSON.parse(entry.value) as Record<string, unknown>;
    expect(rights).toEqual(expect.any(String));
    await store.put(keys.idempotency(tenantId, hash), JSON.stringify(legacy));
  } finally {
    await store.close();
  }
  const retry = await writer.post('/tokens', request);
  expect(retry.status).toBe(201);
  expect(retry.body.id).toBe(first.body.id);
});

describe('deduplication hands back the token of the first deduplicating create: no other write re-points it', () => {
  // The victim deduplicates its value and keeps the id it gets; the attacker writes tokens of its own, in a container
  // only it reads and updates, and tries to be the token the victim's next deduplicating create gets back.
  const parties = async () => {
    const victim = client(api.url, (await app({ type: 'private', permissions: ['token:create', 'token:read'] })).key);
    const attacker = client(
      api.url,
      (
        await app({
          type: 'private',
          rules: [
            {
              description: 'own',
              priority: 1,
              container: '/attacker/',
              transform: 'reveal',
              permissions: ['token:create', 'token:read', 'token:update', 'token:delete'],
            },
          ],
        })
      ).key,
    );
    return { victim, attacker };
  };
  const dedup = (value: string) => ({ type: 'token', data: value, deduplicate_token: true });
  const own = (value: string) => ({ type: 'token', data: value, containers: ['/attacker/'] });

  test('a create without deduplicate_token leaves the entry with the live token it names', async () => {
    const { victim, attacker } = await parties();
    const mine = (await victim.post('/tokens', { body: dedup('dedup-victim-1') })).body;
    for (const deduplicate_token of [undefined, false]) {
      const theirs = await attacker.post('/tokens', { body: { ...own('dedup-victim-1'), deduplicate_token } });
      expect(theirs.status).toBe(201);
      expect(theirs.body.id).not.toBe(mine.id);
      expect((await victim.post('/tokens', { body: dedup('dedup-victim-1') })).body.id).toBe(mine.id);
    }
  });

  test('an update that gives a token an indexed value, or keeps one, does not take the entry', async () => {
    const { victim, attacker } = await parties();
    const mine = (await victim.post('/tokens', { body: dedup('dedup-victim-2') })).body;
    const theirs = (await attacker.post('/tokens', { body: own('something else') })).body;
    for (const body of [{ data: 'dedup-victim-2' }, { metadata: { again: 'yes' } }]) {
      expect((await attacker.patch(`/tokens/${theirs.id}`, { body, headers: MERGE })).status).toBe(200);
      expect((await victim.post('/tokens', { body: dedup('dedup-victim-2') })).body.id).toBe(mine.id);
    }
  });

  test('once the token it names is gone, the next deduplicating create makes a new token, not another equal one', async () => {
    const { victim, attacker } = await parties();
    const theirs = (await attacker.post('/tokens', { body: own('dedup-victim-3') })).body;
    // The attacker's own deduplicated token, changed to other data: it gives up the entry and takes no other.
    const held = (await attacker.post('/tokens', { body: { ...own('dedup-victim-3'), deduplicate_token: true } })).body;
    expect(held.id).not.toBe(theirs.id);
    expect(
      (await attacker.patch(`/tokens/${held.id}`, { body: { data: 'dedup-victim-4' }, headers: MERGE })).status,
    ).toBe(200);
    const mine = (await victim.post('/tokens', { body: dedup('dedup-victim-3') })).body;
    expect([theirs.id, held.id]).not.toContain(mine.id);
    expect((await victim.post('/tokens', { body: dedup('dedup-victim-4') })).body.id).not.toBe(held.id);
    // Deleting a token the entry does not name leaves the entry.
    expect((await attacker.delete(`/tokens/${theirs.id}`)).status).toBe(204);
    expect((await victim.post('/tokens', { body: dedup('dedup-victim-3') })).body.id).toBe(mine.id);
  });
});

describe('a reactor or proxy runs with its application’s rights only when written with application:update', () => {
  const READ_TOKEN =
    'module.exports = async function (req) { return { raw: await req.bt.tokens.retrieve(req.args.id) }; };';

  test('reactor:create cannot attach an application whose rights the creator lacks', async () => {
    const reader = await revealingApplication(api.url, managementKey, ['token:read']);
    const builder = client(
      api.url,
      (await app({ type: 'management', permissions: ['reactor:create', 'reactor:read', 'reactor:update'] })).key,
    );
    const created = await builder.post('/reactors', {
      body: { name: 'exfiltrate', code: READ_TOKEN, application: { id: reader.id } },
    });
    expect(created.status).toBe(403);
    expect(created.body.detail).toMatch(/application:update/);

    // Without an application the same key builds reactors; it cannot add one later, nor rewrite one that has one.
    const plain = await builder.post('/reactors', { body: { name: 'plain', code: READ_TOKEN } });
    expect(plain.status).toBe(201);
    expect(
      (await builder.patch(`/reactors/${plain.body.id}`, { body: { application: { id: reader.id } }, headers: MERGE }))
        .status,
    ).toBe(403);
    const admin = client(api.url, managementKey);
    const attached = await admin.post('/reactors', {
      body: { name: 'reader', code: READ_TOKEN, application: { id: reader.id } },
    });
    expect(attached.status).toBe(201);
    expect(
      (
        await builder.put(`/reactors/${attached.body.id}`, {
          body: { name: 'reader', code: READ_TOKEN, application: { id: reader.id } },
        })
      ).status,
    ).toBe(403);
    expect((await admin.get(`/reactors/${attached.body.id}`)).body.name).toBe('reader');

    // Nor rewrite the code of a formula that a reactor with an application runs.
    const formulaBody = { name: 'f', type: 'private', code: READ_TOKEN, configuration: [], request_parameters: [] };
    const shared = (await admin.post('/reactor-formulas', { body: formulaBody })).body;
    expect(
      (
        await admin.post('/reactors', {
          body: { name: 'by formula', formula: { id: shared.id }, configuration: {}, application: { id: reader.id } },
        })
      ).status,
    ).toBe(201);
    const rewritten = await builder.put(`/reactor-formulas/${shared.id}`, {
      body: { ...formulaBody, code: 'module.exports = async () => ({ raw: 1 });' },
    });
    expect(rewritten.status).toBe(403);
    expect((await admin.get(`/reactor-formulas/${shared.id}`)).body.code).toBe(READ_TOKEN);
    const own = (await builder.post('/reactor-formulas', { body: formulaBody })).body;
    expect((await builder.put(`/reactor-formulas/${own.id}`, { body: { ...formulaBody, name: 'g' } })).status).toBe(
      200,
    );
  });

  test('proxy:create cannot attach an application, so no keyless proxy carries its rights to a chosen destination', async () => {
    const user = await app({ type: 'private', permissions: ['token:use', 'token:read'] });
    const builder = client(
      api.url,
      (await app({ type: 'management', permissions: ['proxy:create', 'proxy:read', 'proxy:update'] })).key,
    );
    const body = {
      name: 'exfiltrate',
      destination_url: 'https://example.com/collect',
      require_auth: false,
      application: { id: user.id },
      request_transform: { code: 'module.exports = async (req) => ({ ...req, body: await req.bt.tokens.list() });' },
    };
    const created = await builder.post('/proxies', { body });
    expect(created.status).toBe(403);
    expect(created.body.key).toBeUndefined();

    // An administrator's proxy with an application cannot be re-pointed by a key that may only edit proxies.
    const admin = client(api.url, managementKey);
    const proxy = (await admin.post('/proxies', { body: { ...body, name: 'issuer', request_transform: undefined } }))
      .body;
    expect(proxy.id).toBeDefined();
    const repointed = await builder.patch(`/proxies/${proxy.id}`, {
      body: { destination_url: 'https://example.org/collect' },
      headers: MERGE,
    });
    expect(repointed.status).toBe(403);
    expect((await admin.get(`/proxies/${proxy.id}`)).body.destination_url).toBe('https://example.com/collect');
    // Proxies without an application stay the builder's to rename (re-pointing one: abuse-redirect.test.ts).
    const plain = await builder.post('/proxies', { body: { name: 'plain', destination_url: 'https://example.com/x' } });
    expect(plain.status).toBe(201);
    expect(
      (await builder.patch(`/proxies/${plain.body.id}`, { body: { name: 'renamed' }, headers: MERGE })).status,
    ).toBe(200);
  });

  // application:update may attach an application because it could take the application's key anyway; a key that
  // expires cannot take a lasting one (regenerating it is refused), and a reactor or proxy outlives its writer: a
  // keyless proxy would be a lasting key to the application's rights, held by whoever has the proxy key.
  test('a key that expires attaches no application that outlives it, nor rewrites code that runs with one', async () => {
    const soon = new Date(Date.now() + 3600_000).toISOString();
    const sooner = new Date(Date.now() + 1800_000).toISOString();
    const lasting = await app({ type: 'private', permissions: ['token:use', 'token:read'] });
    const brief = await app({ type: 'private', permissions: ['token:use', 'token:read'], expires_at: sooner });
    const temp = client(
      api.url,
      (
        await app({
          type: 'management',
          permissions: ['application:update', 'proxy:create', 'proxy:update', 'reactor:create', 'reactor:update'],
          expires_at: soon,
        })
      ).key,
    );
    const proxy = (application: { id: string }) => ({
      name: 'outlives',
      destination_url: 'https://example.com/collect',
      require_auth: false,
      application,
      request_transform: { code: 'module.exports = async (req) => ({ ...req, body: await req.bt.tokens.list() });' },
    });
    const reactor = (application: { id: string }) => ({ name: 'outlives', code: READ_TOKEN, application });

    const keyless = await temp.post('/proxies', { body: proxy({ id: lasting.id }) });
    expect([keyless.status, keyless.body.key]).toEqual([403, undefined]);
    expect(keyless.body.detail).toMatch(/expires/);
    expect((await temp.post('/reactors', { body: reactor({ id: lasting.id }) })).status).toBe(403);

    // Nor attached later, nor by rewriting what an administrator made with a lasting application.
    const mine = await temp.post('/proxies', { body: proxy({ id: brief.id }) });
    expect(mine.status).toBe(201);
    expect(
      (await temp.patch(`/proxies/${mine.body.id}`, { body: { application: { id: lasting.id } }, headers: MERGE }))
        .status,
    ).toBe(403);
    const admin = client(api.url, managementKey);
    const theirs = (await admin.post('/reactors', { body: reactor({ id: lasting.id }) })).body;
    expect(
      (await temp.put(`/reactors/${theirs.id}`, { body: { ...reactor({ id: lasting.id }), code: READ_TOKEN + ' ' } }))
        .status,
    ).toBe(403);
    const formulaBody = { name: 'f', type: 'private', code: READ_TOKEN, configuration: [], request_parameters: [] };
    const shared = (await admin.post('/reactor-formulas', { body: formulaBody })).body;
    expect(
      (
        await admin.post('/reactors', {
          body: { name: 'by formula', formula: { id: shared.id }, configuration: {}, application: { id: lasting.id } },
        })
      ).status,
    ).toBe(201);
    expect(
      (
        await temp.put(`/reactor-formulas/${shared.id}`, {
          body: { ...formulaBody, code: 'module.exports = async () => ({ raw: 1 });' },
        })
      ).status,
    ).toBe(403);

    // An application that ends before the key does is the key's to attach, and no application needs no check.
    expect((await temp.post('/reactors', { body: reactor({ id: brief.id }) })).status).toBe(201);
    expect((await temp.post('/reactors', { body: { name: 'plain', code: READ_TOKEN } })).status).toBe(201);
  });

  // A managed application's keys are the operator's (a tenant key cannot regenerate or add one: 409), so its rights
  // are the operator's to hand to code as well: declare the Reactor or Proxy in Kubernetes with its applicationRef.
  test('an application declared as a Kubernetes object is attached by the operator only', async () => {
    const asOperator = (method: string, path: string, body: unknown, owner?: string) =>
      call(api.url, method, path, {
        key: api.operatorKey,
        body,
        headers: { 'BT-TENANT-ID': tenantId, ...(owner ? { 'BT-MANAGED-BY': owner } : {}) },
      });
    const managed = (
      await asOperator(
        'POST',
        '/applications',
        { name: 'payments', type: 'private', permissions: ['token:use', 'token:read'] },
        'Application/shop/payments',
      )
    ).body;
    const admin = client(api.url, managementKey);
    expect((await admin.post(`/applications/${managed.id}/regenerate`)).status).toBe(409);

    const reactor = { name: 'managed rights', code: READ_TOKEN, application: { id: managed.id } };
    const proxy = {
      name: 'managed rights',
      destination_url: 'https://example.com/collect',
      require_auth: false,
      application: { id: managed.id },
    };
    const refused = await admin.post('/reactors', { body: reactor });
    expect(refused.status).toBe(403);
    expect(refused.body.detail).toContain('Application shop/payments');
    const keyless = await admin.post('/proxies', { body: proxy });
    expect([keyless.status, keyless.body.key]).toEqual([403, undefined]);
    const plain = (await admin.post('/reactors', { body: { name: 'plain', code: READ_TOKEN } })).body;
    expect(
      (await admin.patch(`/reactors/${plain.id}`, { body: { application: { id: managed.id } }, headers: MERGE }))
        .status,
    ).toBe(403);

    // The operator attaches it; a tenant key then rewrites neither the code nor the formula that runs with it.
    const theirs = await asOperator('POST', '/reactors', reactor);
    expect(theirs.status).toBe(201);
    expect(
      (await admin.put(`/reactors/${theirs.body.id}`, { body: { ...reactor, code: READ_TOKEN + ' ' } })).status,
    ).toBe(403);
    const formulaBody = { name: 'f', type: 'private', code: READ_TOKEN, configuration: [], request_parameters: [] };
    const shared = (await admin.post('/reactor-formulas', { body: formulaBody })).body;
    const declared = await asOperator(
      'POST',
      '/reactors',
      { name: 'declared', formula: { id: shared.id }, configuration: {}, application: { id: managed.id } },
      'Reactor/shop/declared',
    );
    expect(declared.status).toBe(201);
    const rewritten = await admin.put(`/reactor-formulas/${shared.id}`, {
      body: { ...formulaBody, code: 'module.exports = async () => ({ raw: 1 });' },
    });
    expect(rewritten.status).toBe(403);
    expect((await admin.get(`/reactor-formulas/${shared.id}`)).body.code).toBe(READ_TOKEN);
    expect((await asOperator('POST', '/proxies', proxy)).status).toBe(201);
  });
});

describe("the tokens a reactor's result asks for are created with no more than its application's rights, or the caller's", () => {
  // Passes its args on to be tokenized: whatever container, id and deduplication the caller asks for.
  const PASS_THROUGH = 'module.exports = async (req) => ({ tokenize: req.args.token });';
  const card = (id: string, container: string) => ({
    type: 'card_number',
    id,
    data: '4242424242424242',
    containers: [container],
  });

  test('a caller holding token:use alone creates nothing through a reactor without an application', async () => {
    const owner = client(
      api.url,
      (await app({ type: 'private', permissions: ['token:create', 'token:read', 'token:use'] })).key,
    );
    const existing = (await owner.post('/tokens', { body: card('victim-card', '/pci/high/') })).body;
    expect(existing.id).toBe('victim-card');
    const reactor = (
      await client(api.url, managementKey).post('/reactors', { body: { name: 'pass', code: PASS_THROUGH } })
    ).body;
    const caller = client(
      api.url,
      (
        await app({
          type: 'private',
          rules: [{ priority: 1, container: '/general/', transform: 'reveal', permissions: ['token:use'] }],
        })
      ).key,
    );
    const planted = await caller.post(`/reactors/${reactor.id}/react`, {
      body: { args: { token: card('planted', '/pci/high/') } },
    });
    expect(planted.status).toBe(403);
    expect((await owner.get('/tokens/planted')).status).toBe(404);
    // Deduplication would have told whether a card the caller cannot read exists: no answer either way now.
    const probed = await caller.post(`/reactors/${reactor.id}/react`, {
      body: { args: { token: { ...card('probe', '/pci/high/'), deduplicate_token: true } } },
    });
    expect(probed.status).toBe(403);
    expect(JSON.stringify(probed.body)).not.toContain('victim-card');
  });

  test("with an application, its access rules decide, as for the code's own `bt` calls", async () => {
    const general = await app({
      type: 'private',
      rules: [
        { priority: 1, container: '/general/', transform: 'reveal', permissions: ['token:create', 'token:read'] },
      ],
    });
    const reactor = (
      await client(api.url, managementKey).post('/reactors', {
        body: { name: 'pass with app', code: PASS_THROUGH, application: { id: general.id } },
      })
    ).body;
    const caller = client(api.url, (await app({ type: 'private', permissions: ['token:use'] })).key);
    const refused = await caller.post(`/reactors/${reactor.id}/react`, {
      body: { args: { token: card('into-pci', '/pci/high/') } },
    });
    expect(refused.status).toBe(403);
    const allowed = await caller.post(`/reactors/${reactor.id}/react`, {
      body: { args: { token: { type: 'token', data: 'plain', containers: ['/general/'] } } },
    });
    expect(allowed.status).toBe(200);
    const created = await client(api.url, general.key).get(`/tokens/${allowed.body.tokens.id}`);
    expect(created.body).toMatchObject({ data: 'plain', created_by: general.id });
  });
});

describe('a key minted for reactor code (`bt`) makes nothing that outlives its 2-minute lease', () => {
  test('it neither creates nor authorizes sessions (403), which would keep its rights for hours', async () => {
    const reader = await app({ type: 'private', permissions: ['token:read'] });
    const browser = await app({ type: 'public', permissions: ['token:create'] });
    // As the worker holds it: minted the way an invocation mints it, then taken out of the worker.
    const directory = new ApplicationDirectory(api.context.store, 60);
    try {
      const minted = new BtKeys(api.context.store, directory);
      const readerBt = client(api.url, await minted.keyFor(tenantId, reader.id));
      const browserBt = client(api.url, await minted.keyFor(tenantId, browser.id));
      expect((await readerBt.get('/tokens')).status).toBe(200);

      const session = (await client(api.url, browser.key).post('/sessions')).body;
      const authorize = { nonce: session.nonce, permissions: ['token:read'] };
      const refused = await readerBt.post('/sessions/authorize', { body: authorize });
      expect(refused.status).toBe(403);
      expect(refused.body.code).toBe('TV_FORBIDDEN');
      expect(refused.body.detail).toContain('minted for reactor code');
      // The nonce is still unspent: the application's own key authorizes the session.
      expect((await client(api.url, reader.key).post('/sessions/authorize', { body: authorize })).status).toBe(204);

      const created = await browserBt.post('/sessions');
      expect(created.status).toBe(403);
      expect(created.body.detail).toContain('minted for reactor code');
    } finally {
      await directory.stop();
    }
  });

  test("its answers are replayed to no key that holds less: BT-IDEMPOTENCY-KEY after the application's rights narrowed", async () => {
    const rules = (transform: string) => [
      { description: 'all', priority: 1, container: '/', transform, permissions: ['token:create', 'token:read'] },
    ];
    const owner = await app({ type: 'private', rules: rules('reveal') });
    const directory = new ApplicationDirectory(api.context.store, 60);
    const request = { body: { type: 'token', data: 'replayed secret' }, headers: { 'BT-IDEMPOTENCY-KEY': 'bt-retry' } };
    try {
      const bt = client(api.url, await new BtKeys(api.context.store, directory).keyFor(tenantId, owner.id));
      const first = await bt.post('/tokens', request);
      expect(first.status).toBe(201);
      expect(first.body.data).toBe('replayed secret');
    } finally {
      await directory.stop();
    }
    const narrowed = await client(api.url, managementKey).put(`/applications/${owner.id}`, {
      body: { name: 'abuse', rules: rules('mask') },
    });
    expect(narrowed.status).toBe(200);
    const own = client(api.url, owner.key);
    // The application's own key (whose answers the minted key's share a scope with) now reads masked.
    const token = (await own.post('/tokens', { body: { type: 'token', data: 'fresh secret' } })).body;
    expect(token.data).not.toBe('fresh secret');

    const replayed = await own.post('/tokens', request);
    expect(replayed.body.data).toBeUndefined();
    expect(replayed.status).toBe(409);
    expect(replayed.body.code).toBe('TV_IDEMPOTENCY_CONFLICT');
    expect(replayed.body.detail).toContain('rights');
  });

  test('an application id that comes back as a management application gets reactor code no management key', async () => {
    // Only the operator chooses ids: it deletes the reactor's application and makes a management one under its id.
    const asOperator = (method: string, path: string, body?: unknown) =>
      call(api.url, method, path, { key: api.operatorKey, headers: { 'BT-TENANT-ID': tenantId }, body });
    const id = crypto.randomUUID();
    expect(
      (
        await asOperator('POST', '/applications', {
          id,
          name: 'reactor app',
          type: 'private',
          permissions: ['token:use'],
        })
      ).status,
    ).toBe(201);
    const reactor = await client(api.url, managementKey).post('/reactors', {
      body: { name: 'r', configuration: {}, code: 'module.exports = async () => ({ raw: {} });', application: { id } },
    });
    expect(reactor.status).toBe(201);
    expect((await asOperator('DELETE', `/applications/${id}`)).status).toBe(204);
    expect(
      (
        await asOperator('POST', '/applications', {
          id,
          name: 'now management',
          type: 'management',
          permissions: ['webhook:create'],
        })
      ).status,
    ).toBe(201);

    const invoker = client(api.url, (await app({ type: 'private', permissions: ['token:use'] })).key);
    const answer = await invoker.post(`/reactors/${reactor.body.id}/react`, { body: { args: {} } });
    expect(answer.status).toBe(409);
    expect(answer.body.detail).toContain('management application');
    const mintedManagementKeys = (await api.context.store.range(keys.apiKeys))
      .map((entry) => decode<KeyIndexEntry>('key-index', entry.value))
      .filter((entry) => entry.parent?.application_id === id);
    expect(mintedManagementKeys).toEqual([]);
  });
});
