// Acceptance: the official client @basis-theory/basis-theory-js 4.x, pointed at `tokenvault dev` by its base URL
// only, manages applications, the tenant, sessions and permissions. The CLI runs as a real child process from dist/
// (`make test` builds it; when iterating, run `npx tsc -p tsconfig.build.json` first); see test/support/dev-server.ts.
import { BasisTheory } from '@basis-theory/basis-theory-js';
import { rejection, startDevServer, type DevServer } from '../support/dev-server.js';

let dev: DevServer;

/** An SDK client for a key. The SDK keeps http only when the host is exactly `localhost`. */
function sdk(key: string) {
  return new BasisTheory().init(key, { apiBaseUrl: dev.baseUrl, disableTelemetry: true });
}
let bt: Awaited<ReturnType<typeof sdk>>;

beforeAll(async () => {
  dev = await startDevServer();
  expect(dev.banner.URL).toBe(`http://127.0.0.1:${dev.port}`);
  expect(dev.banner['Management key']).toBe(dev.rootKey);
  expect(dev.banner['Operator key']).toMatch(/^key_/);
  bt = await sdk(dev.rootKey);
});

afterAll(async () => {
  await dev?.stop();
});

describe('applications through the SDK', () => {
  test('create, retrieve, list, update, regenerate the key, retrieve by key, delete', async () => {
    const created = await bt.applications.create({
      name: 'Checkout server',
      type: 'private',
      permissions: ['token:read', 'token:use'],
    });
    expect(created).toMatchObject({
      name: 'Checkout server',
      type: 'private',
      permissions: ['token:read', 'token:use'],
    });
    expect(created.id).toMatch(/^[0-9a-f-]{36}$/);
    expect(created.key).toMatch(/^key_/);
    expect(created.keys?.[0]?.key).toBe(created.key);

    expect(await bt.applications.retrieve(created.id)).toMatchObject({
      id: created.id,
      name: 'Checkout server',
      type: 'private',
    });
    expect((await bt.applications.retrieve(created.id)).key).toBeUndefined();

    const page = await bt.applications.list();
    expect(page.pagination).toMatchObject({ totalItems: 2, pageNumber: 1, pageSize: 20, totalPages: 1 });
    expect(page.data.map((a) => a.id)).toContain(created.id);

    const updated = await bt.applications.update(created.id, {
      name: 'Checkout server v2',
      permissions: ['token:use'],
    });
    expect(updated).toMatchObject({ id: created.id, name: 'Checkout server v2', permissions: ['token:use'] });
    expect(await bt.applications.retrieve(created.id)).toMatchObject({
      name: 'Checkout server v2',
      permissions: ['token:use'],
    });

    const regenerated = await bt.applications.regenerateKey(created.id);
    expect(regenerated.id).toBe(created.id);
    expect(regenerated.key).toMatch(/^key_/);
    expect(regenerated.key).not.toBe(created.key);

    const withOldKey = await sdk(created.key!);
    const stale = await rejection(withOldKey.applications.retrieveByKey());
    expect(stale).toMatchObject({ name: 'BasisTheoryApiError', status: 401 });

    const withNewKey = await sdk(regenerated.key!);
    expect(await withNewKey.applications.retrieveByKey()).toMatchObject({
      id: created.id,
      name: 'Checkout server v2',
      type: 'private',
    });

    await bt.applications.delete(created.id);
    expect(await rejection(bt.applications.retrieve(created.id))).toMatchObject({ status: 404 });
    expect(await rejection(withNewKey.applications.retrieveByKey())).toMatchObject({ status: 401 });
  });

  test('validation errors reach the caller as 400 with the offending field', async () => {
    const tooLong = await rejection(
      bt.applications.create({ name: 'n'.repeat(201), type: 'private', permissions: ['token:read'] }),
    );
    expect(tooLong).toMatchObject({ status: 400, data: { status: 400, title: 'Bad Request' } });
    expect(tooLong.data.errors).toEqual({ name: [expect.stringContaining('200')] });

    const publicReader = await rejection(
      bt.applications.create({ name: 'Browser', type: 'public', permissions: ['token:read'] }),
    );
    expect(publicReader.status).toBe(400);
    expect(Object.keys(publicReader.data.errors).join()).toMatch(/^permissions/);
    expect(JSON.stringify(publicReader.data.errors)).toContain('token:read');
  });
});

describe('the tenant through the SDK', () => {
  test('retrieve, update with settings, usage report', async () => {
    const tenant = await bt.tenants.retrieve();
    expect(tenant.name).toBe('Development');
    expect(tenant.id).toMatch(/^[0-9a-f-]{36}$/);
    // The SDK camelCases response keys deeply, settings' keys included.
    expect(tenant.settings).toEqual({ deduplicateTokens: 'false', fingerprintTokens: 'true' });

    const renamed = await bt.tenants.update({ name: 'Renamed', settings: { deduplicate_tokens: 'true' } });
    expect(renamed).toMatchObject({
      id: tenant.id,
      name: 'Renamed',
      settings: { deduplicateTokens: 'true', fingerprintTokens: 'true' },
    });
    expect(await bt.tenants.retrieve()).toMatchObject({ name: 'Renamed', settings: { deduplicateTokens: 'true' } });

    // A camelCased key, as the SDK hands settings back, is snake_cased again on the way out.
    const roundTrip = await bt.tenants.update({ name: 'Renamed', settings: { deduplicateTokens: 'false' } });
    expect(roundTrip.settings).toMatchObject({ deduplicateTokens: 'false' });

    const usage = (await bt.tenants.retrieveUsageReport()) as any;
    expect(usage.tokenReport).toEqual({
      totalTokens: expect.any(Number),
      metricsByType: expect.any(Object),
      includedMonthlyActiveTokens: expect.any(Number),
      monthlyActiveTokens: expect.any(Number),
    });
    expect(usage.totalTokens).toBe(usage.tokenReport.totalTokens);
  });
});

describe('sessions through the SDK', () => {
  let publicApp: { id: string; key: string };
  let privateKey: string;

  beforeAll(async () => {
    const pub = await bt.applications.create({ name: 'Browser', type: 'public', permissions: ['token:create'] });
    const priv = await bt.applications.create({ name: 'Server', type: 'private', permissions: ['token:read'] });
    publicApp = { id: pub.id, key: pub.key! };
    privateKey = priv.key!;
  });

  test('a public key creates a session; a private key authorizes its nonce once', async () => {
    const browser = await sdk(publicApp.key);
    const before = Date.now();
    const session = await browser.sessions.create();
    expect(session.sessionKey).toMatch(/^key_/);
    expect(session.nonce).toEqual(expect.any(String));
    const ttl = Date.parse(session.expiresAt) - before;
    expect(ttl).toBeGreaterThan(170_000);
    expect(ttl).toBeLessThan(190_000);

    const server = await sdk(privateKey);
    // The server answers 204; the SDK resolves (with `{}`, its camelCase transform applied to the empty body).
    await server.sessions.authorize({ nonce: session.nonce, permissions: ['token:read'] });
    const again = await rejection(server.sessions.authorize({ nonce: session.nonce, permissions: ['token:read'] }));
    expect(again.status).toBe(400);
    expect(again.data.errors).toHaveProperty('nonce');

    const asSession = await sdk(session.sessionKey);
    expect(await asSession.applications.retrieveByKey()).toMatchObject({
      id: publicApp.id,
      type: 'public',
      name: 'Browser',
    });
  });

  test('a session that was never authorized has no access', async () => {
    const session = await (await sdk(publicApp.key)).sessions.create();
    const unauthorized = await sdk(session.sessionKey);
    expect(await rejection(unauthorized.applications.list())).toMatchObject({ status: 403 });
  });
});

describe('permissions through the SDK', () => {
  test('list filtered by application type', async () => {
    const publicPermissions = await bt.permissions.list({ applicationType: 'public' });
    expect(publicPermissions.map((p) => p.type).sort()).toEqual([
      'token-intent:create',
      'token:create',
      'token:update',
    ]);
    for (const permission of publicPermissions) {
      expect(permission.applicationTypes).toContain('public');
      expect(permission.description).toEqual(expect.any(String));
    }
    const all = await bt.permissions.list();
    expect(all.length).toBeGreaterThan(publicPermissions.length);
  });
});
