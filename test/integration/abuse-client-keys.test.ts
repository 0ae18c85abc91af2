// Client-side encryption keys cannot pile up (issue 35, point 4): the per-tenant cap counted only unexpired keys and
// every record was kept seven days past its expiry with no minimum lifetime, so keys made to expire at once were all
// accepted and all kept, and every POST /keys and GET /keys read them all. Now the cap bounds the records kept (a
// create past it removes the longest-expired keys) and a key lives at least TOKENVAULT_CLIENT_KEY_MIN_TTL_SECONDS.
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { keys } from '../../src/store/keys.js';
import { createTenant, startTestApi, type TestApi } from '../support/api.js';
import { client } from '../support/http.js';
import { sleep } from '../support/wait.js';

const PER_TENANT = 4;
const MIN_TTL_SECONDS = 2;

let api: TestApi;

beforeAll(async () => {
  api = await startTestApi({
    TOKENVAULT_CLIENT_KEYS_PER_TENANT: String(PER_TENANT),
    TOKENVAULT_CLIENT_KEY_MIN_TTL_SECONDS: String(MIN_TTL_SECONDS),
  });
}, 60_000);

afterAll(async () => {
  await api?.close();
});

/** The client-key records the store holds for the tenant: what every create and list reads. */
async function recordsKept(tenantId: string): Promise<number> {
  return api.context.store.count(keys.clientKeys(tenantId));
}

describe('client-key records per tenant', () => {
  test('keys that expire at once never make the tenant keep more than the cap', async () => {
    const { tenantId, managementKey } = await createTenant(api.url, api.operatorKey);
    const owner = client(api.url, managementKey);
    const soon = () => new Date(Date.now() + (MIN_TTL_SECONDS + 0.5) * 1000).toISOString();
    const made: string[] = [];
    // Three rounds of a full cap of keys that all expire together: 12 creates under a cap of 4.
    for (let round = 0; round < 3; round++) {
      const expiresAt = soon();
      for (let i = 0; i < PER_TENANT; i++) {
        const created = await owner.post('/keys', { body: { expires_at: expiresAt } });
        expect(created.status).toBe(201);
        made.push(created.body.id as string);
      }
      // The unexpired keys fill the cap: one more is refused, naming the setting.
      const refused = await owner.post('/keys', { body: { expires_at: expiresAt } });
      expect(refused.status).toBe(409);
      expect(refused.body.code).toBe('TV_CLIENT_KEY_LIMIT');
      expect(refused.body.detail).toContain('TOKENVAULT_CLIENT_KEYS_PER_TENANT');
      expect(await recordsKept(tenantId)).toBeLessThanOrEqual(PER_TENANT);
      expect((await owner.get('/keys')).body).toHaveLength(PER_TENANT);
      await sleep(Math.max(0, Date.parse(expiresAt) - Date.now() + 200));
    }
    // The expired keys of the last round are still listed, answering "expired", until a create needs their place.
    const listed = (await owner.get('/keys')).body as { id: string; expires_at: string }[];
    expect(listed.map((k) => k.id).sort()).toEqual(made.slice(-PER_TENANT).sort());
    expect(listed.every((k) => Date.parse(k.expires_at) <= Date.now())).toBe(true);
    // One more create takes the place of the key that expired first; the rest stay.
    const next = await owner.post('/keys', { body: {} });
    expect(next.status).toBe(201);
    expect(await recordsKept(tenantId)).toBe(PER_TENANT);
    const after = ((await owner.get('/keys')).body as { id: string }[]).map((k) => k.id);
    expect(after).toContain(next.body.id);
    expect(after).toHaveLength(PER_TENANT);
  }, 60_000);

  test('a lifetime shorter than TOKENVAULT_CLIENT_KEY_MIN_TTL_SECONDS is refused with 400 naming it', async () => {
    const { tenantId, managementKey } = await createTenant(api.url, api.operatorKey);
    const owner = client(api.url, managementKey);
    for (const ms of [500, 1000, MIN_TTL_SECONDS * 1000 - 300]) {
      const answer = await owner.post('/keys', { body: { expires_at: new Date(Date.now() + ms).toISOString() } });
      expect(answer.status).toBe(400);
      expect(answer.headers.get('content-type')).toMatch(/^application\/problem\+json/);
      expect(Object.keys(answer.body.errors)).toEqual(['expires_at']);
      expect(answer.body.errors.expires_at[0]).toContain('TOKENVAULT_CLIENT_KEY_MIN_TTL_SECONDS');
      expect(answer.body.errors.expires_at[0]).toContain(`${MIN_TTL_SECONDS} seconds`);
    }
    expect(await recordsKept(tenantId)).toBe(0);
    const long = new Date(Date.now() + (MIN_TTL_SECONDS + 5) * 1000).toISOString();
    expect((await owner.post('/keys', { body: { expires_at: long } })).status).toBe(201);
  });
});
