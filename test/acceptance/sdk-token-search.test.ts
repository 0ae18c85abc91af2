// Acceptance: token search through the official clients against `tokenvault dev` (dist/; see
// test/support/dev-server.ts). basis-theory-js's tokens.search is v1 (POST /tokens/search, page numbers);
// @basis-theory/node-sdk's tokens.searchV2 is v2 (POST /v2/tokens/search, a cursor its pager follows).
import { BasisTheory } from '@basis-theory/basis-theory-js';
import { BasisTheoryClient } from '@basis-theory/node-sdk';
import { rejection, startDevServer, type DevServer } from '../support/dev-server.js';

let dev: DevServer;
let privateKey: string;
let maskedKey: string;

const sdk = (key: string) => new BasisTheory().init(key, { apiBaseUrl: dev.baseUrl, disableTelemetry: true });
const nodeSdk = (apiKey: string) => new BasisTheoryClient({ apiKey, baseUrl: dev.baseUrl, maxRetries: 0 });

const SSN_INDEXES = ['{{ data }}', "{{ data | replace: '-', '' }}", '{{ data | last4 }}'];
const created: string[] = [];

beforeAll(async () => {
  dev = await startDevServer();
  const root = await sdk(dev.rootKey);
  privateKey = (
    await root.applications.create({
      name: 'Search server',
      type: 'private',
      rules: [
        {
          description: 'all',
          priority: 1,
          container: '/',
          transform: 'reveal',
          permissions: ['token:create', 'token:read', 'token:search'],
        },
      ],
    })
  ).key!;
  maskedKey = (
    await root.applications.create({ name: 'Masked', type: 'private', permissions: ['token:read', 'token:search'] })
  ).key!;
  const bt = await sdk(privateKey);
  for (const [i, ssn] of ['111-22-3333', '444-55-6666', '777-88-9999'].entries()) {
    const token = await bt.tokens.create({
      type: 'social_security_number',
      data: ssn,
      searchIndexes: SSN_INDEXES,
      metadata: { cohort: 'search-acceptance', rank: String(i) },
    });
    created.push(token.id);
  }
});

afterAll(async () => {
  await dev?.stop();
});

describe('basis-theory-js tokens.search (v1)', () => {
  test('data through a search index, with the read transform', async () => {
    const bt = await sdk(privateKey);
    const found = await bt.tokens.search({ query: 'data:3333 AND type:social_security_number', page: 1, size: 20 });
    expect(found.pagination).toMatchObject({ totalItems: 1, pageNumber: 1, pageSize: 20, totalPages: 1 });
    expect(found.data.map((t) => [t.id, t.data])).toEqual([[created[0], '111-22-3333']]);
  });

  test('page numbers over metadata matches; a masked key sees masked data', async () => {
    const masked = await sdk(maskedKey);
    const first = await masked.tokens.search({ query: 'metadata.cohort:search-acceptance', page: 1, size: 2 });
    expect(first.pagination).toMatchObject({ totalItems: 3, pageNumber: 1, pageSize: 2, totalPages: 2 });
    const second = await masked.tokens.search({ query: 'metadata.cohort:search-acceptance', page: 2, size: 2 });
    const all = [...first.data, ...second.data];
    expect(all.map((t) => t.id).sort()).toEqual([...created].sort());
    expect(all.map((t) => t.data).sort()).toEqual(['XXX-XX-3333', 'XXX-XX-6666', 'XXX-XX-9999']);
  });

  test('a bad query is a 400 naming the position', async () => {
    const bt = await sdk(privateKey);
    const error = await rejection(bt.tokens.search({ query: 'type:social_security_number AND', page: 1 }));
    expect(error.status).toBe(400);
    expect(JSON.stringify(error.data)).toContain('position 31');
  });
});

describe('@basis-theory/node-sdk tokens.searchV2 (v2)', () => {
  test('the pager follows the cursor through every match', async () => {
    const page = await nodeSdk(privateKey).tokens.searchV2({ query: 'metadata.cohort:search-acceptance', size: 1 });
    const ids: string[] = [];
    for await (const token of page) ids.push(token.id!);
    expect(ids.sort()).toEqual([...created].sort());
  });

  test('an exact data value, dashes or not', async () => {
    const client = nodeSdk(privateKey);
    for (const query of ['data:444-55-6666', 'data:444556666']) {
      const page = await client.tokens.searchV2({ query });
      expect(page.data.map((t) => [t.id, t.data])).toEqual([[created[1], '444-55-6666']]);
    }
  });

  test('without token:search: 403', async () => {
    const root = await sdk(dev.rootKey);
    const reader = (await root.applications.create({ name: 'Reader', type: 'private', permissions: ['token:read'] }))
      .key!;
    const error = await rejection<{ statusCode: number }>(nodeSdk(reader).tokens.searchV2({ query: 'type:card' }));
    expect(error.statusCode).toBe(403);
  });
});
