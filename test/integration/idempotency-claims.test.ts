// BT-IDEMPOTENCY-KEY claims that their request never released, on a real etcd: the process was killed mid-request,
// or the store failed under the request and the claim could not be deleted. Such a claim must stop blocking the key
// after its pending time (it used to hold it for the whole 24 hours an answer is replayed: every retry got 409 "still
// in progress"), and the caller must get the request's own error, without waiting for the delete when etcd is down.
import { afterAll, beforeAll, expect, test } from '@jest/globals';
import type { TenantPrincipal } from '../../src/auth/principal.js';
import { Errors } from '../../src/errors/registry.js';
import { IdempotencyService, type Answer } from '../../src/domain/idempotency/service.js';
import type { DataCipher } from '../../src/domain/tokens/records.js';
import type { Store } from '../../src/store/store.js';
import { randomUUID } from 'node:crypto';
import { openTestStore } from '../support/api.js';

const PENDING_SECONDS = 1;
let store: Store;

beforeAll(() => {
  store = openTestStore();
});
afterAll(async () => {
  await store.close();
});

/** No request here finishes with an answer to store, so nothing is ever sealed. */
const noCipher = {} as DataCipher;

function principal(): TenantPrincipal {
  return {
    kind: 'application',
    tenantId: randomUUID(),
    applicationId: randomUUID(),
    applicationType: 'private',
    permissions: new Set(['token:create']),
    rules: [],
  };
}

const request = { route: 'POST /tokens', body: { type: 'token', data: 'x' } };
class Ran extends Error {}
/** A handler that shows it ran by throwing Ran (which releases the claim again). */
const runs = (): Promise<Answer> => Promise.reject(new Ran());

/** Retries the key until the request runs; how long that took, or undefined if it stayed claimed for `seconds`. */
async function secondsUntilItRuns(service: IdempotencyService, who: TenantPrincipal, seconds: number) {
  const start = Date.now();
  while (Date.now() - start < seconds * 1000) {
    const outcome = await service.run(who, 'key-1', request, runs).catch((error: unknown) => error);
    if (outcome instanceof Ran) return (Date.now() - start) / 1000;
    expect(outcome).toBeInstanceOf(Errors.Conflict); // "still in progress"
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  return undefined;
}

test('a claim whose request never finished (its process died) holds the key for its pending time only', async () => {
  const service = new IdempotencyService(store, noCipher, PENDING_SECONDS);
  const who = principal();
  // The first request claims the key and never finishes, as when its API process is killed.
  void service.run(who, 'key-1', request, () => new Promise<Answer>(() => {}));
  await new Promise((resolve) => setTimeout(resolve, 100));
  await expect(service.run(who, 'key-1', request, runs)).rejects.toBeInstanceOf(Errors.Conflict);
  // etcd rounds a lease up to its minimum TTL (2 s with its default election timeout), so allow a few seconds.
  expect(await secondsUntilItRuns(service, who, 8)).toBeDefined();
});

test('a failed request whose claim cannot be deleted answers with its own error, and the key runs again later', async () => {
  // The store is real; only its delete fails, as when etcd goes away between the request's failure and the delete.
  const failingDelete: Store = Object.create(store, {
    delete: { value: () => Promise.reject(new Errors.StoreUnavailable()) },
  });
  const service = new IdempotencyService(failingDelete, noCipher, PENDING_SECONDS);
  const who = principal();
  const invalid = new Errors.InvalidBody({ errors: { data: ['is required'] } });
  await expect(service.run(who, 'key-1', request, () => Promise.reject(invalid))).rejects.toBe(invalid);
  expect(await secondsUntilItRuns(service, who, 8)).toBeDefined();
});

test('a request that failed because etcd is unavailable does not also wait for the delete of its claim', async () => {
  // A delete that never answers stands in for etcd that does not answer (each call would wait out its deadline).
  const hangingDelete: Store = Object.create(store, { delete: { value: () => new Promise(() => {}) } });
  const service = new IdempotencyService(hangingDelete, noCipher, PENDING_SECONDS);
  const unavailable = new Errors.StoreUnavailable();
  const outcome = service.run(principal(), 'key-1', request, () => Promise.reject(unavailable));
  let timer: NodeJS.Timeout | undefined;
  const waited = new Promise((resolve) => (timer = setTimeout(() => resolve('still waiting for the delete'), 3000)));
  try {
    expect(await Promise.race([outcome.catch((error: unknown) => error), waited])).toBe(unavailable);
  } finally {
    clearTimeout(timer);
  }
});
