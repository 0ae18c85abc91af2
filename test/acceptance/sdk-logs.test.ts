// Acceptance: the audit log through the official clients, pointed at `tokenvault dev` by their base URL only.
// node-sdk's logs.list pages by page number and iterates until an empty page; basis-theory-js's logs.list sends its
// camelCase query as snake_case. The CLI runs from dist/ (`npx tsc -p tsconfig.build.json` first when iterating).
import { BasisTheory } from '@basis-theory/basis-theory-js';
import { BasisTheoryClient } from '@basis-theory/node-sdk';
import { startDevServer, type DevServer } from '../support/dev-server.js';

let dev: DevServer;

const nodeSdk = (apiKey: string) => new BasisTheoryClient({ apiKey, baseUrl: dev.baseUrl, maxRetries: 0 });

let tokenIds: string[];
let privateKey: string;

beforeAll(async () => {
  dev = await startDevServer();
  const root = nodeSdk(dev.rootKey);
  const app = await root.applications.create({
    name: 'Token server',
    type: 'private',
    permissions: ['token:create', 'token:read', 'token:delete'],
  });
  privateKey = app.key!;
  const bt = nodeSdk(privateKey);
  tokenIds = [];
  for (let i = 0; i < 3; i++) tokenIds.push((await bt.tokens.create({ type: 'token', data: `logged-${i}` })).id!);
  await bt.tokens.get(tokenIds[0]);
  await bt.tokens.delete(tokenIds[0]);
});

afterAll(async () => {
  await dev?.stop();
});

test('node-sdk logs.list: filters by entity, pages by page number to the end, camelCase fields', async () => {
  const root = nodeSdk(dev.rootKey);
  const first = await root.logs.list({ entityType: 'token', entityId: tokenIds[0], size: 2 });
  expect(first.data).toHaveLength(2);
  expect(first.data.map((log) => log.operation)).toEqual(['delete', 'read']);
  const all = [];
  for await (const log of first) all.push(log);
  expect(all.map((log) => log.operation)).toEqual(['delete', 'read', 'create']);
  expect(all[0]).toMatchObject({ entityType: 'token', entityId: tokenIds[0], actorType: 'application' });
  expect(all[0].createdAt).toBeInstanceOf(Date);
  expect(all[0].tenantId).toMatch(/^[0-9a-f-]{36}$/);

  // Dates go as ISO strings: a window in the future holds nothing, one around now holds the creations.
  const future = await root.logs.list({ entityType: 'token', startDate: new Date(Date.now() + 3600_000) });
  expect(future.data).toEqual([]);
  const recent = await root.logs.list({
    entityType: 'token',
    startDate: new Date(Date.now() - 3600_000),
    endDate: new Date(Date.now() + 1000),
    size: 100,
  });
  const created = recent.data.filter((log) => log.operation === 'create').map((log) => log.entityId);
  expect(created).toEqual([...tokenIds].reverse());
});

test('node-sdk logs.getEntityTypes: the fixed list', async () => {
  const types = await nodeSdk(dev.rootKey).logs.getEntityTypes();
  expect(types.map((t) => t.value)).toEqual(expect.arrayContaining(['token', 'application', 'reactor', 'proxy']));
  expect(types.every((t) => typeof t.displayName === 'string')).toBe(true);
});

test('basis-theory-js logs.list: entityType and entityId arrive as entity_type and entity_id', async () => {
  const bt = await new BasisTheory().init(dev.rootKey, { apiBaseUrl: dev.baseUrl, disableTelemetry: true });
  const page = await bt.logs.list({ entityType: 'token', entityId: tokenIds[1] });
  expect(page.data).toHaveLength(1);
  expect(page.data[0]).toMatchObject({ entityType: 'token', entityId: tokenIds[1], operation: 'create' });
  expect(page.pagination.pageSize).toBe(20);
});

test('a key without log:read is refused', async () => {
  await expect(nodeSdk(privateKey).logs.list()).rejects.toMatchObject({ statusCode: 403 });
});
