// EtcdStore on a real etcd: the keys put with about the same time to live share a lease (src/store/lease-pool.ts),
// each lasting at least its time to live, and a lease etcd no longer has is replaced without failing the write.
import { randomUUID } from 'node:crypto';
import { Etcd3 } from 'etcd3';
import { EtcdStore } from '../../src/store/etcd.js';

const endpoints = (process.env.TOKENVAULT_TEST_ETCD_ENDPOINTS ?? '').split(',').filter(Boolean);

describe('EtcdStore leases', () => {
  let store: EtcdStore;
  let raw: Etcd3;
  let prefix: string;

  beforeAll(() => {
    raw = new Etcd3({ hosts: endpoints });
  });
  afterAll(() => raw.close());
  beforeEach(() => {
    store = new EtcdStore({ endpoints });
    prefix = `/leases-test/${randomUUID()}/`;
  });
  afterEach(async () => {
    await raw.delete().prefix(prefix);
    await store.close();
  });

  /** The lease etcd holds the key on ('0': none). */
  const leaseOf = async (key: string) => (await raw.kv.range({ key: Buffer.from(key) })).kvs[0]?.lease ?? 'missing';
  const grantedSeconds = async (id: string) => Number((await raw.leaseClient.leaseTimeToLive({ ID: id })).grantedTTL);

  test('keys put with about the same time to live share one lease, granted for at most 5% more', async () => {
    // Puts, creates and transactions (a session's two keys) alike, at once and one after the other. The creates ask
    // for a little more than the hour: what is left of the lease granted for it (3,660 s) covers them, within 5%.
    await Promise.all(Array.from({ length: 20 }, (_, i) => store.put(`${prefix}put-${i}`, 'v', { ttlSeconds: 3600 })));
    for (let i = 0; i < 5; i++)
      expect(await store.create(`${prefix}created-${i}`, 'v', { ttlSeconds: 3620 })).toBe(true);
    await store.commit({
      success: [
        { type: 'put', key: `${prefix}txn-a`, value: 'v', ttlSeconds: 3600 },
        { type: 'put', key: `${prefix}txn-b`, value: 'v', ttlSeconds: 3600 },
      ],
    });
    const keys = [
      ...Array.from({ length: 20 }, (_, i) => `${prefix}put-${i}`),
      ...Array.from({ length: 5 }, (_, i) => `${prefix}created-${i}`),
      `${prefix}txn-a`,
      `${prefix}txn-b`,
    ];
    const leases = new Set(await Promise.all(keys.map(leaseOf)));
    expect(leases.size).toBe(1);
    const [lease] = leases;
    expect(lease).not.toBe('0');
    // At least the hour asked for, and at most 5% more (kube-apiserver's rule for Events; capped at 60 s).
    expect(await grantedSeconds(lease)).toBeGreaterThanOrEqual(3600);
    expect(await grantedSeconds(lease)).toBeLessThanOrEqual(3660);
  });

  test('a short time to live (a replica heartbeat) keeps a lease of its own, of exactly that time', async () => {
    await store.put(`${prefix}a`, 'v', { ttlSeconds: 10 });
    await store.put(`${prefix}b`, 'v', { ttlSeconds: 10 });
    const [a, b] = [await leaseOf(`${prefix}a`), await leaseOf(`${prefix}b`)];
    expect(a).not.toBe(b);
    expect(await grantedSeconds(a)).toBe(10);
  });

  test('a time to live far from the shared lease gets a lease of its own', async () => {
    await store.put(`${prefix}hour`, 'v', { ttlSeconds: 3600 });
    await store.put(`${prefix}day`, 'v', { ttlSeconds: 86_400 });
    const day = await leaseOf(`${prefix}day`);
    expect(day).not.toBe(await leaseOf(`${prefix}hour`));
    expect(await grantedSeconds(day)).toBeGreaterThanOrEqual(86_400);
  });

  test('a shared lease revoked behind the store: the next write gets a new lease and is stored', async () => {
    await store.put(`${prefix}first`, 'v', { ttlSeconds: 3600 });
    const revoked = await leaseOf(`${prefix}first`);
    await raw.leaseClient.leaseRevoke({ ID: revoked });
    expect(await store.get(`${prefix}first`)).toBeUndefined(); // the revocation deleted it

    await store.put(`${prefix}second`, 'v', { ttlSeconds: 3600 });
    expect(await store.create(`${prefix}third`, 'v', { ttlSeconds: 3600 })).toBe(true);
    expect((await store.get(`${prefix}second`))?.value).toBe('v');
    expect((await store.get(`${prefix}third`))?.value).toBe('v');
    const renewed = await leaseOf(`${prefix}second`);
    expect(renewed).not.toBe(revoked);
    expect(await leaseOf(`${prefix}third`)).toBe(renewed);
  });
});
