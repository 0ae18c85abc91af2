// LeasePool: which lease a key with a time to live is put on (src/store/lease-pool.ts). The grants are a counter here;
// test/integration/etcd-leases.test.ts checks the same on a real etcd.
import { LeasePool, reuseSeconds } from '../../src/store/lease-pool.js';

function pool() {
  let now = 1_000_000;
  const granted: Array<{ id: string; seconds: number }> = [];
  let failNext = false;
  const leases = new LeasePool(
    async (seconds) => {
      if (failNext) {
        failNext = false;
        throw new Error('etcd unavailable');
      }
      const id = `lease-${granted.length + 1}`;
      granted.push({ id, seconds });
      return id;
    },
    () => now,
  );
  return {
    leases,
    granted,
    advance: (ms: number) => (now += ms),
    failNextGrant: () => (failNext = true),
  };
}

describe('LeasePool', () => {
  test('a key may outlive its time to live by 5% of it, at most 60 s, and none below 20 s', () => {
    expect(reuseSeconds(10)).toBe(0);
    expect(reuseSeconds(19)).toBe(0);
    expect(reuseSeconds(20)).toBe(1);
    expect(reuseSeconds(600)).toBe(30);
    expect(reuseSeconds(3600)).toBe(60);
    expect(reuseSeconds(86_400)).toBe(60);
  });

  test('keys asking for the same time to live share one lease, granted once for the longer time', async () => {
    const { leases, granted } = pool();
    const ids = await Promise.all(Array.from({ length: 50 }, () => leases.leaseFor(3600)));
    expect(new Set(ids)).toEqual(new Set(['lease-1']));
    expect(granted).toEqual([{ id: 'lease-1', seconds: 3660 }]);
  });

  test('a lease is shared while it still covers the time asked, and no longer', async () => {
    const { leases, granted, advance } = pool();
    await leases.leaseFor(3600);
    advance(59_000); // 3,601 s left: covers an hour
    expect(await leases.leaseFor(3600)).toBe('lease-1');
    advance(2_000); // 3,599 s left: would end a second early
    expect(await leases.leaseFor(3600)).toBe('lease-2');
    expect(granted.map((g) => g.seconds)).toEqual([3660, 3660]);
  });

  test('a shorter time to live does not take a lease that would keep its key too long', async () => {
    const { leases, advance } = pool();
    await leases.leaseFor(3600);
    expect(await leases.leaseFor(600)).toBe('lease-2'); // 3,660 s left, more than 600 + 30
    advance(10_000);
    expect(await leases.leaseFor(600)).toBe('lease-2'); // 620 s left: within 600 + 30
  });

  test('short times to live get a lease each, of exactly that time', async () => {
    const { leases, granted } = pool();
    expect(await leases.leaseFor(10)).toBe('lease-1');
    expect(await leases.leaseFor(10)).toBe('lease-2');
    expect(granted.map((g) => g.seconds)).toEqual([10, 10]);
  });

  test('one lease carries at most 1,000 keys', async () => {
    const { leases } = pool();
    const ids = await Promise.all(Array.from({ length: 1001 }, () => leases.leaseFor(3600)));
    expect(ids.filter((id) => id === 'lease-1')).toHaveLength(1000);
    expect(ids[1000]).toBe('lease-2');
  });

  test('a failed grant fails its callers and is not kept', async () => {
    const { leases, failNextGrant } = pool();
    failNextGrant();
    await expect(leases.leaseFor(3600)).rejects.toThrow('etcd unavailable');
    expect(await leases.leaseFor(3600)).toBe('lease-1');
  });

  test('a forgotten lease (etcd no longer has it) is not handed out again', async () => {
    const { leases } = pool();
    const first = await leases.leaseFor(3600);
    leases.forget(first);
    expect(await leases.leaseFor(3600)).toBe('lease-2');
  });
});
