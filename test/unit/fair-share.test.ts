// The fair shares of the reactor workers (src/runtime/client/fair-share.ts): caps per tenant and per reactor, a bounded FIFO
// queue per tenant with a wait limit, and the 429 that names the limit that was hit.
import { describe, expect, test } from '@jest/globals';
import { VaultError } from '../../src/errors/registry.js';
import { FairShare } from '../../src/runtime/client/fair-share.js';

/** Work that finishes when told to. */
function gate() {
  let open!: () => void;
  const done = new Promise<void>((resolve) => (open = resolve));
  return { done, open };
}

const tick = () => new Promise((resolve) => setImmediate(resolve));

async function busy(promise: Promise<unknown>): Promise<VaultError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(VaultError);
  expect((error as VaultError).code).toBe('TV_RUNTIME_BUSY');
  expect((error as VaultError).status).toBe(429);
  return error as VaultError;
}

describe('FairShare', () => {
  test('a tenant at its cap waits, and starts when a slot comes free; other tenants are not held up', async () => {
    const share = new FairShare({
      tenantConcurrency: 2,
      reactorConcurrency: 2,
      queueLength: 5,
      queueTimeoutMs: 10_000,
    });
    const held = [gate(), gate()];
    const running = held.map((g, i) => share.run('a', `r${i}`, () => g.done));
    let third = false;
    const waiting = share.run('a', 'r2', async () => (third = true));
    await tick();
    expect(share.usage('a')).toEqual({ running: 2, waiting: 1 });
    expect(await share.run('b', 'r0', async () => 'b ran')).toBe('b ran');
    expect(third).toBe(false);
    held[0].open();
    await waiting;
    expect(third).toBe(true);
    held[1].open();
    await Promise.all(running);
    expect(share.usage('a')).toEqual({ running: 0, waiting: 0 });
  });

  test('a reactor at its cap does not hold up the tenant’s other reactors, even with its own waiters queued', async () => {
    const share = new FairShare({
      tenantConcurrency: 4,
      reactorConcurrency: 1,
      queueLength: 5,
      queueTimeoutMs: 10_000,
    });
    const hung = gate();
    const first = share.run('a', 'hung', () => hung.done);
    const queued = share.run('a', 'hung', async () => 'second');
    await tick();
    expect(await share.run('a', 'other', async () => 'other ran')).toBe('other ran');
    hung.open();
    await first;
    expect(await queued).toBe('second');
  });

  test('a full queue is 429 at once, naming the queue length; a wait that runs out is 429 naming the cap', async () => {
    const limits: string[] = [];
    const share = new FairShare(
      { tenantConcurrency: 1, reactorConcurrency: 1, queueLength: 1, queueTimeoutMs: 50 },
      (limit) => limits.push(limit),
    );
    const hung = gate();
    const running = share.run('a', 'r', () => hung.done);
    const waiting = share.run('a', 'r', async () => undefined);
    const full = await busy(share.run('a', 'r', async () => undefined));
    expect(full.detail).toContain('TOKENVAULT_RUNTIME_QUEUE_LENGTH');
    expect(full.headers?.['Retry-After']).toBe('1');
    const late = await busy(waiting);
    expect(late.detail).toContain('TOKENVAULT_RUNTIME_QUEUE_TIMEOUT_MS');
    expect(late.detail).toContain('TOKENVAULT_RUNTIME_TENANT_CONCURRENCY');
    expect(limits).toEqual(['queue_length', 'tenant_concurrency']);
    hung.open();
    await running;
  });

  test('the 429 names the reactor cap when only the reactor was full', async () => {
    const share = new FairShare({ tenantConcurrency: 10, reactorConcurrency: 1, queueLength: 0, queueTimeoutMs: 50 });
    const hung = gate();
    const running = share.run('a', 'r', () => hung.done);
    expect((await busy(share.run('a', 'r', async () => undefined))).detail).toContain(
      'TOKENVAULT_RUNTIME_REACTOR_CONCURRENCY',
    );
    hung.open();
    await running;
  });

  test('a slot is released when the work fails', async () => {
    const share = new FairShare({ tenantConcurrency: 1, reactorConcurrency: 1, queueLength: 0, queueTimeoutMs: 50 });
    await expect(share.run('a', 'r', async () => Promise.reject(new Error('boom')))).rejects.toThrow('boom');
    expect(await share.run('a', 'r', async () => 'again')).toBe('again');
    expect(share.usage('a')).toEqual({ running: 0, waiting: 0 });
  });
});
