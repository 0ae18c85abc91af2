// The per-tenant gate of requests that read thousands of records (src/domain/tenant-gate.ts): `running` at once,
// `waiting` in order behind them, the rest refused naming the settings; other tenants are not held by it.
import { expect, test } from '@jest/globals';
import { TenantGate } from '../../src/domain/tenant-gate.js';
import { VaultError } from '../../src/errors/registry.js';

const KIND = { what: 'token searches', runningSetting: 'TOKENVAULT_SEARCH_TENANT_CONCURRENCY', instead: 'narrow it' };

/** Work that ends when told to, recording when it started. */
function held(log: string[], name: string) {
  let end!: () => void;
  const ended = new Promise<void>((resolve) => (end = resolve));
  return { work: async () => (log.push(name), await ended, name), end };
}

test('two run, two wait in order, the fifth is refused; another tenant runs at once; turns pass on as work ends', async () => {
  const gate = new TenantGate(KIND, { running: 2, waiting: 2 });
  const log: string[] = [];
  const [a, b, c, d] = ['a', 'b', 'c', 'd'].map((name) => held(log, name));
  const results = [a, b, c, d].map((h) => gate.run('t1', h.work));
  await Promise.resolve();
  expect(log).toEqual(['a', 'b']);

  const refused = await gate.run('t1', async () => 'e').catch((error: unknown) => error);
  expect(refused).toBeInstanceOf(VaultError);
  expect((refused as VaultError).code).toBe('TV_TENANT_BUSY');
  expect((refused as VaultError).status).toBe(429);
  expect((refused as VaultError).detail).toContain('TOKENVAULT_SEARCH_TENANT_CONCURRENCY');
  expect((refused as VaultError).detail).toContain('TOKENVAULT_SCAN_QUEUE_LENGTH');

  expect(await gate.run('t2', async () => 'other')).toBe('other');

  b.end();
  expect(await results[1]).toBe('b');
  await new Promise((resolve) => setImmediate(resolve));
  expect(log).toEqual(['a', 'b', 'c']);
  a.end();
  c.end();
  d.end();
  expect(await Promise.all(results)).toEqual(['a', 'b', 'c', 'd']);
  expect(log).toEqual(['a', 'b', 'c', 'd']);
  // All done: the tenant runs at once again, and a failure frees its turn too.
  await expect(gate.run('t1', async () => Promise.reject(new Error('boom')))).rejects.toThrow('boom');
  expect(await gate.run('t1', async () => 'again')).toBe('again');
});

test("whenBusy 'wait' is never refused: it queues past `waiting`, in order, and fills the queue for later requests", async () => {
  const gate = new TenantGate(KIND, { running: 1, waiting: 1 });
  const log: string[] = [];
  const [a, b, c] = ['a', 'b', 'c'].map((name) => held(log, name));
  const first = gate.run('t1', a.work);
  const second = gate.run('t1', b.work);
  // The queue is full: a refusable request is refused, one that must not be waits its turn behind it.
  await expect(gate.run('t1', async () => 'refused')).rejects.toBeInstanceOf(VaultError);
  const waited = gate.run('t1', c.work, { whenBusy: 'wait' });
  await Promise.resolve();
  expect(log).toEqual(['a']);
  a.end();
  b.end();
  c.end();
  expect(await Promise.all([first, second, waited])).toEqual(['a', 'b', 'c']);
  expect(log).toEqual(['a', 'b', 'c']);
  // Waiting, it takes a place in the queue: the next refusable request finds it full.
  const [d, e] = ['d', 'e'].map((name) => held(log, name));
  const running = gate.run('t1', d.work);
  const queued = gate.run('t1', e.work, { whenBusy: 'wait' });
  await expect(gate.run('t1', async () => 'refused')).rejects.toBeInstanceOf(VaultError);
  d.end();
  e.end();
  expect(await Promise.all([running, queued])).toEqual(['d', 'e']);
});
