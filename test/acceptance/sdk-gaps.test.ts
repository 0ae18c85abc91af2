// Acceptance: issue 16's wrong-data cases, the roles and application-template catalogues, and the features this
// deployment does not offer, through the official clients pointed at `tokenvault dev` by their base URL only. The CLI
// runs from dist/ (`npx tsc -p tsconfig.build.json` first when iterating); see test/support/dev-server.ts.
import { BasisTheory } from '@basis-theory/basis-theory-js';
import { BasisTheoryClient } from '@basis-theory/node-sdk';
import { rejection, startDevServer, type DevServer } from '../support/dev-server.js';

let dev: DevServer;

function sdk(key: string) {
  return new BasisTheory().init(key, { apiBaseUrl: dev.baseUrl, disableTelemetry: true });
}
type Sdk = Awaited<ReturnType<typeof sdk>>;
const nodeSdk = (apiKey: string) => new BasisTheoryClient({ apiKey, baseUrl: dev.baseUrl, maxRetries: 0 });
type NodeSdkError = { statusCode: number; body: any };

const ALL_TOKENS = ['token:create', 'token:read', 'token:update', 'token:delete', 'token:use'];

let root: Sdk;
let bt: Sdk;
let privateKey: string;

beforeAll(async () => {
  dev = await startDevServer();
  root = await sdk(dev.rootKey);
  const app = await root.applications.create({
    name: 'gaps server',
    type: 'private',
    rules: [{ description: 'all', priority: 1, container: '/', transform: 'reveal', permissions: ALL_TOKENS }],
  });
  privateKey = app.key!;
  bt = await sdk(privateKey);
});

afterAll(async () => {
  await dev?.stop();
});

describe('wrong data, through the SDKs', () => {
  test('basis-theory-js tokens.list({ page, size }) pages with totalItems and totalPages', async () => {
    // A fresh tenant-wide count is not known here (other tests write tokens): count before and after.
    const before = (await bt.tokens.list({ page: 1, size: 1 })).pagination.totalItems!;
    for (let i = 0; i < 3; i++) await bt.tokens.create({ type: 'token', data: `paged-${i}` });
    const first = await bt.tokens.list({ page: 1, size: 2 });
    expect(first.pagination).toMatchObject({
      totalItems: before + 3,
      pageNumber: 1,
      pageSize: 2,
      totalPages: Math.ceil((before + 3) / 2),
    });
    expect(first.data).toHaveLength(2);
    const last = await bt.tokens.list({ page: first.pagination.totalPages!, size: 2 });
    expect(last.data.length).toBeGreaterThan(0);
  });

  test('node-sdk tokens.listV2({ fingerprint }) returns only that fingerprint', async () => {
    const node = nodeSdk(privateKey);
    const a = await node.tokens.create({ type: 'card_number', data: '5555555555554444' });
    const b = await node.tokens.create({ type: 'card_number', data: '5555555555554444' });
    await node.tokens.create({ type: 'card_number', data: '4000056655665556' });
    const page = await node.tokens.listV2({ fingerprint: a.fingerprint, size: 100 });
    expect(page.data.map((t) => t.id).sort()).toEqual([a.id, b.id].sort());
  });

  test('basis-theory-js: a token created with the legacy privacy block lands in its container', async () => {
    const token = await bt.tokens.create({
      type: 'token',
      data: 'private',
      privacy: { classification: 'pii', impactLevel: 'moderate' },
    } as never);
    expect(token.containers).toEqual(['/pii/moderate/']);
  });

  test('node-sdk applications.list({ type }) filters by type', async () => {
    const node = nodeSdk(dev.rootKey);
    await node.applications.create({ name: 'browser', type: 'public', permissions: ['token:create'] });
    const publics = await node.applications.list({ type: 'public', size: 100 });
    expect(publics.data.length).toBeGreaterThan(0);
    expect(publics.data.every((a) => a.type === 'public')).toBe(true);
  });

  test('both SDKs read total_tokens from the usage report', async () => {
    // node-sdk's TenantUsageReport is just { totalTokens }; basis-theory-js reads it there and in tokenReport.
    const report = await nodeSdk(dev.rootKey).tenants.self.getUsageReports();
    expect(report.totalTokens).toEqual(expect.any(Number));
    expect(report.totalTokens).toBeGreaterThan(0);
    const legacy = await root.tenants.retrieveUsageReport();
    expect(legacy.totalTokens).toBe(report.totalTokens);
    expect(legacy.tokenReport.totalTokens).toBe(report.totalTokens);
  });

  test('node-sdk idempotencyKey on reactors.update and tokens.update replays instead of applying twice', async () => {
    const node = nodeSdk(dev.rootKey);
    const code = 'module.exports = async function () { return { raw: {} }; };';
    const reactor = await node.reactors.create({ name: 'idem', code });
    const idempotencyKey = `idem-${Date.now()}`;
    const first = await node.reactors.update(reactor.id!, { name: 'idem-2', code }, { idempotencyKey });
    const again = await node.reactors.update(reactor.id!, { name: 'idem-2', code }, { idempotencyKey });
    expect(again).toEqual(first);
    const conflict = await rejection<NodeSdkError>(
      node.reactors.update(reactor.id!, { name: 'idem-3', code }, { idempotencyKey }),
    );
    expect(conflict.statusCode).toBe(409);

    const tokens = nodeSdk(privateKey);
    const token = await tokens.tokens.create({ type: 'token', data: 'x' });
    const key = `tok-${Date.now()}`;
    await tokens.tokens.update(token.id!, { metadata: { n: '1' } }, { idempotencyKey: key });
    expect(
      (
        await rejection<NodeSdkError>(
          tokens.tokens.update(token.id!, { metadata: { n: '2' } }, { idempotencyKey: key }),
        )
      ).statusCode,
    ).toBe(409);
    expect((await tokens.tokens.get(token.id!)).metadata).toEqual({ n: '1' });
  });
});

describe('catalogues, through the SDKs', () => {
  test('node-sdk roles.list and applicationTemplates.list/get; basis-theory-js applicationTemplates', async () => {
    const node = nodeSdk(dev.rootKey);
    expect((await node.roles.list()).map((r) => r.name)).toEqual(['ADMIN', 'PRIVACY']);
    const templates = await node.applicationTemplates.list();
    expect(templates.length).toBeGreaterThanOrEqual(3);
    const starter = templates.find((t) => t.applicationType === 'public' && t.isStarter)!;
    expect(starter.permissions).toEqual(['token:create']);
    expect(await node.applicationTemplates.get(starter.id!)).toEqual(starter);
    const legacy = await root.applicationTemplates.list();
    expect(legacy.map((t) => t.id)).toEqual(templates.map((t) => t.id));
    expect((await root.applicationTemplates.retrieve(starter.id!)).templateType).toBe('starters');
  });
});

describe('not supported here, through the SDKs', () => {
  test('node-sdk 3-D Secure, tenant members, network tokens, documents → 501 TV_NOT_SUPPORTED naming the feature', async () => {
    const node = nodeSdk(dev.rootKey);
    // Thunks, called one at a time: a rejection must not arrive before anything awaits it.
    const calls: Array<[string, () => Promise<unknown>]> = [
      ['3-D Secure', () => node.threeds.sessions.get('00000000-0000-4000-8000-000000000000')],
      ['Tenant members', () => node.tenants.members.list()],
      ['Tenant invitations', () => node.tenants.invitations.list()],
      ['Network tokens', () => node.networkTokens.get('00000000-0000-4000-8000-000000000000')],
      ['Documents', () => node.documents.get('00000000-0000-4000-8000-000000000000')],
    ];
    for (const [feature, call] of calls) {
      const error = await rejection<NodeSdkError>(call());
      expect([feature, error.statusCode, error.body?.code]).toEqual([feature, 501, 'TV_NOT_SUPPORTED']);
      expect(error.body.detail).toContain(feature);
    }
  });

  test('basis-theory-js tenant members → 501, not 404; a token with `encrypted` that is no JWE → 400 naming it', async () => {
    expect(await rejection(root.tenants.listMembers())).toMatchObject({ status: 501 });
    const encrypted = await rejection<{ status: number; data: any }>(
      bt.tokens.create({ type: 'token', encrypted: 'a.b.c.d.e' } as never),
    );
    expect(encrypted.status).toBe(400);
    expect(Object.keys(encrypted.data.errors)).toEqual(['encrypted']);
  });
});
