// audit verify keeps a bounded verdict: a chain altered throughout (one break per entry) reports the oldest breaks and
// how many there are, without holding one break per entry of a log of millions.
import { expect, test } from '@jest/globals';
import { sortKey } from '../../src/audit/chain.js';
import { MAX_BREAKS, verifyChain } from '../../src/audit/verify.js';
import { keys } from '../../src/store/keys.js';
import { MemoryStore } from '../../src/store/memory.js';

test('a log of unreadable entries: every break counted, the oldest MAX_BREAKS kept, in order', async () => {
  const store = new MemoryStore();
  const tenant = '00000000-0000-4000-8000-000000000001';
  const ENTRIES = 2 * MAX_BREAKS + 500;
  for (let seq = 1; seq <= ENTRIES; seq++) {
    await store.put(`${keys.auditLog(tenant)}${sortKey(1_700_000_000_000 + seq, seq, '')}`, 'not json');
  }
  const verdict = await verifyChain(store, tenant);
  expect(verdict.entries).toBe(ENTRIES);
  // Every entry is unreadable; the head is missing too, but an unreadable entry cannot show that.
  expect(verdict.breakCount).toBe(ENTRIES);
  expect(verdict.breaks).toHaveLength(MAX_BREAKS);
  expect(verdict.breaks.map((b) => b.seq)).toEqual(Array.from({ length: MAX_BREAKS }, (_, i) => i + 1));
  await store.close();
});
