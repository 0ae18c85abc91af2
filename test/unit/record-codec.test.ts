// The record codec: what `encode` writes, how `decode` reads unversioned records and upgrades old ones in order; and
// listRecords, which reads a prefix of them in pages.
import { expect, test } from '@jest/globals';
import {
  currentVersion,
  decode,
  encode,
  RecordVersionError,
  UPGRADES,
  type RecordKind,
  type Upgrade,
} from '../../src/store/codec.js';
import { MemoryStore } from '../../src/store/memory.js';
import { listRecords } from '../../src/store/records.js';

test('a record is written with its kind’s current version and read back without it', () => {
  const text = encode('tenant', { id: 't1', name: 'A' });
  expect(JSON.parse(text)).toEqual({ _v: 1, id: 't1', name: 'A' });
  expect(decode('tenant', text)).toEqual({ id: 't1', name: 'A' });
  // A value copied from a raw stored record keeps its members, but the version written is the current one.
  expect(encode('tenant', { _v: 0, id: 't1' })).toBe('{"_v":1,"id":"t1"}');
});

test('a record without a version (written before versions existed) reads as version 1, unchanged', () => {
  const old = JSON.stringify({ id: 't1', name: 'A', settings: { x: [1, 2] } });
  expect(decode('tenant', old)).toEqual({ id: 't1', name: 'A', settings: { x: [1, 2] } });
});

test('upgrades run in order from the stored version to the current one', () => {
  const table: Record<RecordKind, readonly Upgrade[]> = {
    ...UPGRADES,
    tenant: [(r) => ({ ...r, label: r.name, name: undefined }), (r) => ({ ...r, labels: [r.label], label: undefined })],
  };
  expect(currentVersion('tenant', table)).toBe(3);
  const clean = (value: object) => JSON.parse(JSON.stringify(value)) as unknown;
  expect(clean(decode('tenant', JSON.stringify({ id: 't1', name: 'A' }), table))).toEqual({ id: 't1', labels: ['A'] });
  expect(clean(decode('tenant', JSON.stringify({ _v: 2, id: 't1', label: 'B' }), table))).toEqual({
    id: 't1',
    labels: ['B'],
  });
  expect(clean(decode('tenant', encode('tenant', { id: 't1', labels: ['C'] }, table), table))).toEqual({
    id: 't1',
    labels: ['C'],
  });
});

test('a version newer than this build knows is refused, not misread', () => {
  expect(() => decode('token', JSON.stringify({ _v: 2, id: 'x' }))).toThrow(RecordVersionError);
  expect(() => decode('token', JSON.stringify({ _v: 'one', id: 'x' }))).toThrow(/schema version one/);
});

test('every kind is at version 1 but applications, whose v2 lets an application have several keys', () => {
  for (const kind of Object.keys(UPGRADES) as RecordKind[]) {
    expect(currentVersion(kind)).toBe(kind === 'application' ? 2 : 1);
  }
});

test('a v1 application (one key_hash beside keys[0]) reads as v2 with that key first, same id, carrying its hash', () => {
  const key = { id: '2f1c6d4e-1111-4a2b-8c3d-0123456789ab', created_at: '2026-01-01T00:00:00.000Z', created_by: 'x' };
  const v1 = JSON.stringify({ _v: 1, id: 'a1', name: 'A', key_hash: 'ab'.repeat(32), keys: [key] });
  expect(decode('application', v1)).toEqual({ id: 'a1', name: 'A', keys: [{ ...key, key_hash: 'ab'.repeat(32) }] });
  // Unversioned records (before the codec) are v1 too; an application created without a key has none.
  expect(decode('application', JSON.stringify({ id: 'a2', keys: [] }))).toEqual({ id: 'a2', keys: [] });
  // A v1 record that somehow lists no key for its hash still reads the same key id every time.
  const bare = JSON.stringify({ id: 'a3', key_hash: 'cd'.repeat(32), keys: [], created_at: 'c', created_by: 'b' });
  const once = decode<{ keys: { id: string }[] }>('application', bare);
  expect(once.keys[0].id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
  expect(decode<{ keys: { id: string }[] }>('application', bare).keys[0].id).toBe(once.keys[0].id);
});

test('listRecords reads a prefix of any size in pages, every record once, in key order', async () => {
  const store = new MemoryStore();
  const ids = Array.from({ length: 1_201 }, (_, i) => `r${String(i).padStart(5, '0')}`);
  for (const id of ids) await store.put(`/list/${id}`, encode('tenant', { id }));
  await store.put('/listed-not/x', encode('tenant', { id: 'outside' }));
  const ranges: Array<number | undefined> = [];
  const countedRange = store.countedRange.bind(store);
  store.countedRange = (prefix, options) => {
    ranges.push(options?.limit);
    return countedRange(prefix, options);
  };
  const records = await listRecords<{ id: string }>(store, 'tenant', '/list/');
  expect(records.map((r) => r.id)).toEqual(ids);
  // Three pages of at most 500: no one response holds the whole prefix.
  expect(ranges).toEqual([500, 500, 500]);
});
