// The per-tenant admission of requests (src/http/middleware/admission.ts): a slot is held until the answer's
// connection closes, a request whose client left while it waited does not keep its slot when its turn comes, and the
// requests of reactor code (a minted key) never wait for the callers' slots their invocation may hold.
import { expect, test } from '@jest/globals';
import { EventEmitter } from 'node:events';
import type { Response } from 'express';
import type { Principal } from '../../src/auth/principal.js';
import type { Request } from 'express';
import { admit, admitRequest, isLargeBody, requestGates } from '../../src/http/middleware/admission.js';
import { VaultError } from '../../src/errors/registry.js';

const response = () => new EventEmitter() as unknown as Response;
const settle = () => new Promise((resolve) => setImmediate(resolve));
/** 'admitted', 'refused', or 'waiting' if neither happened by the next turn of the event loop. */
const outcome = (admission: Promise<void>) =>
  Promise.race([
    admission.then(
      () => 'admitted',
      () => 'refused',
    ),
    settle().then(() => 'waiting'),
  ]);

function principal(tenantId: string, minted = false): Principal {
  return {
    kind: 'application',
    tenantId,
    applicationId: 'app',
    applicationType: 'private',
    permissions: new Set(),
    rules: [],
    ...(minted ? { parent: { applicationId: 'app', grant: 'g' } } : {}),
  };
}

test('one runs, one waits, the third is refused naming both settings; a closed answer passes the turn on', async () => {
  const gates = requestGates({ running: 1, waiting: 1 });
  const first = response();
  await admit(gates, first, { principal: principal('t1') });
  const second = admit(gates, response(), { principal: principal('t1') });
  expect(await outcome(second)).toBe('waiting');

  const refused = await admit(gates, response(), { principal: principal('t1') }).catch((error: unknown) => error);
  expect((refused as VaultError).code).toBe('TV_TENANT_BUSY');
  expect((refused as VaultError).detail).toContain('TOKENVAULT_TENANT_CONCURRENCY');
  expect((refused as VaultError).detail).toContain('TOKENVAULT_TENANT_QUEUE_LENGTH');
  // Neither another tenant, nor the operator, nor the tenant's reactor code is held by the tenant's callers.
  expect(await outcome(admit(gates, response(), { principal: principal('t2') }))).toBe('admitted');
  expect(await outcome(admit(gates, response(), { principal: { kind: 'operator' } }))).toBe('admitted');
  expect(await outcome(admit(gates, response(), { principal: principal('t1', true) }))).toBe('admitted');

  first.emit('close');
  expect(await outcome(second)).toBe('admitted');
});

test('a request whose client left while it waited gives its slot back when its turn comes', async () => {
  const gate = requestGates({ running: 1, waiting: 1 }).callers;
  const [first, left] = [response(), response()];
  await admitRequest(gate, 't1', first);
  const waited = admitRequest(gate, 't1', left);
  left.emit('close');
  first.emit('close');
  await waited;
  await settle();
  // The slot is free again, and the queue holds one again.
  expect(await outcome(admitRequest(gate, 't1', response()))).toBe('admitted');
  expect(await outcome(admitRequest(gate, 't1', response()))).toBe('waiting');
});

test('a body is large over the threshold, or when its size is unknown before it is read: chunked or content-coded', () => {
  const large = (headers: Record<string, string>) => isLargeBody({ headers } as unknown as Request, 1024);
  expect(large({})).toBe(false); // no body
  expect(large({ 'content-length': '1024' })).toBe(false);
  expect(large({ 'content-length': '1025' })).toBe(true);
  expect(large({ 'content-length': '10', 'content-encoding': 'identity' })).toBe(false);
  expect(large({ 'content-length': '10', 'content-encoding': 'gzip' })).toBe(true);
  expect(large({ 'transfer-encoding': 'chunked' })).toBe(true);
  expect(large({ 'content-length': 'x' })).toBe(true); // refused later (400); never let through as small
});
