// Which changes the audit group commit puts in one transaction with their entries. Reactors created at once on one
// formula each compare the formula's revision: they must still share a transaction (at 16 creates in flight, one
// transaction each had made a create cost the API 2.6 times its CPU), with that compare sent once. A change that writes
// a key another one compares must still wait for the next transaction. On the embedded store (MemoryStore).
import { expect, test } from '@jest/globals';
import { ChainAppender, type ChangeWrites } from '../../src/audit/chain.js';
import type { AuditRecord } from '../../src/audit/entry.js';
import { keys } from '../../src/store/keys.js';
import { MemoryStore } from '../../src/store/memory.js';
import type { Txn } from '../../src/store/store.js';

const tenantId = '00000000-0000-4000-8000-00000000000b';

const record = (n: number): AuditRecord => ({
  tenant_id: tenantId,
  actor_type: 'operator',
  entity_type: 'reactor',
  entity_id: `00000000-0000-4000-8000-${String(n).padStart(12, '0')}`,
  operation: 'create',
  message: `created ${n}`,
});

/** A store that keeps what each commit sent. */
async function recordingStore() {
  const store = new MemoryStore();
  await store.put(keys.tenant(tenantId), '{}');
  const commits: Txn[] = [];
  const commit = store.commit.bind(store);
  store.commit = async (txn: Txn) => {
    commits.push(txn);
    return commit(txn);
  };
  return { store, commits };
}

test('changes that compare the same key share one transaction, the compare sent once', async () => {
  const { store, commits } = await recordingStore();
  const shared = '/test/formula';
  const revision = await store.put(shared, 'v1');
  const chain = new ChainAppender(store);
  const changes = Array.from({ length: 10 }, (_, n): ChangeWrites => ({
    compare: [
      { key: `/test/reactor/${n}`, modRevision: 0 },
      { key: shared, modRevision: revision },
    ],
    success: [{ type: 'put', key: `/test/reactor/${n}`, value: String(n) }],
  }));
  const entries = await Promise.all(changes.map((writes, n) => chain.appendWith(record(n), writes)));

  expect(entries.every((entry) => entry !== undefined)).toBe(true);
  expect(commits).toHaveLength(1);
  expect(commits[0].compare!.filter((c) => c.key === shared)).toHaveLength(1);
  expect(await store.range('/test/reactor/')).toHaveLength(10);
});

test('a change that writes a key another one compares waits for the next transaction', async () => {
  const { store, commits } = await recordingStore();
  const shared = '/test/formula';
  const revision = await store.put(shared, 'v1');
  const chain = new ChainAppender(store);
  const [compared, rewritten] = await Promise.all([
    chain.appendWith(record(1), {
      compare: [{ key: shared, modRevision: revision }],
      success: [{ type: 'put', key: '/test/reactor/1', value: '1' }],
    }),
    chain.appendWith(record(2), {
      compare: [{ key: shared, modRevision: revision }],
      success: [{ type: 'put', key: shared, value: 'v2' }],
    }),
  ]);

  // One after the other, as they were queued: both compares held when each was written.
  expect(compared).toBeDefined();
  expect(rewritten).toBeDefined();
  expect(commits).toHaveLength(2);
  expect((await store.get(shared))?.value).toBe('v2');
});

test('changes that compare one key at different revisions go in different transactions', async () => {
  const { store, commits } = await recordingStore();
  const shared = '/test/formula';
  const old = await store.put(shared, 'v1');
  const current = await store.put(shared, 'v2');
  const chain = new ChainAppender(store);
  // One change read the key before its last write (a cache a watch event behind), the other after it.
  const [stale, fresh] = await Promise.all([
    chain.appendWith(record(1), {
      compare: [{ key: shared, modRevision: old }],
      success: [{ type: 'put', key: '/test/reactor/1', value: '1' }],
    }),
    chain.appendWith(record(2), {
      compare: [{ key: shared, modRevision: current }],
      success: [{ type: 'put', key: '/test/reactor/2', value: '2' }],
    }),
  ]);

  // Together they would fail as one, and the fresh change would go back to its caller unwritten as well.
  expect(stale).toBeUndefined();
  expect(fresh).toBeDefined();
  expect(await store.range('/test/reactor/')).toHaveLength(1);
  expect(commits.filter((txn) => txn.compare!.some((c) => c.key === shared))).toHaveLength(2);
});
