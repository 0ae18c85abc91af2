// The per-tenant admission of requests (src/http/middleware/admission.ts): a slot is held until the answer's
// connection closes, and a request whose client left while it waited does not keep its slot when its turn comes.
import { expect, test } from '@jest/globals';
import { EventEmitter } from 'node:events';
import type { Response } from 'express';
import { admitRequest, requestGate } from '../../src/http/middleware/admission.js';
import { VaultError } from '../../src/errors/registry.js';

const response = () => new EventEmitter() as unknown as Response;
const settle = () => new Promise((resolve) => setImmediate(resolve));

test('one runs, one waits, the third is refused naming both settings; a closed answer passes the turn on', async () => {
  const gate = requestGate({ running: 1, waiting: 1 });
  const [first, second, third] = [response(), response(), response()];
  await admitRequest(gate, 't1', first);
  let secondAdmitted = false;
  void admitRequest(gate, 't1', second).then(() => (secondAdmitted = true));

  const refused = await admitRequest(gate, 't1', third).catch((error: unknown) => error);
  expect((refused as VaultError).code).toBe('TV_TENANT_BUSY');
  expect((refused as VaultError).detail).toContain('TOKENVAULT_TENANT_CONCURRENCY');
  expect((refused as VaultError).detail).toContain('TOKENVAULT_TENANT_QUEUE_LENGTH');
  await admitRequest(gate, 't2', response()); // another tenant is not held

  first.emit('close');
  await settle();
  expect(secondAdmitted).toBe(true);
});

test('a request whose client left while it waited gives its slot back when its turn comes', async () => {
  const gate = requestGate({ running: 1, waiting: 1 });
  const [first, left] = [response(), response()];
  await admitRequest(gate, 't1', first);
  const waited = admitRequest(gate, 't1', left);
  left.emit('close');
  first.emit('close');
  await waited;
  await settle();
  // The slot is free again (else this would wait), and the queue holds one again.
  await admitRequest(gate, 't1', response());
  const next = admitRequest(gate, 't1', response()).then(
    () => 'admitted',
    () => 'refused',
  );
  expect(await Promise.race([next, settle().then(() => 'waiting')])).toBe('waiting');
});
