// Which store errors mean "the store is full" (507 TV_STORE_FULL, no retry helps until the operator makes room), on
// etcd and on PostgreSQL, and that a full etcd is no failure of the endpoint for the circuit breaker. The end-to-end
// path on a real etcd is test/integration/store-full.test.ts.
import { expect, test } from '@jest/globals';
import { GRPCResourceExhastedError, GRPCUnavailableError, isRecoverableError } from 'etcd3';
import pg from 'pg';
import { Errors } from '../../src/errors/registry.js';
import { hostBreaker } from '../../src/store/breaker.js';
import { isEtcdNoSpace, isPostgresDiskFull, storeFullOr } from '../../src/store/store-full.js';

/** As etcd3 hands them over: the gRPC status message, the class from its code (8, RESOURCE_EXHAUSTED). */
const noSpace = () =>
  new GRPCResourceExhastedError(
    'GRPCResourceExhastedError: 8 RESOURCE_EXHAUSTED: etcdserver: mvcc: database space exceeded',
  );
const tooManyRequests = () =>
  new GRPCResourceExhastedError('GRPCResourceExhastedError: 8 RESOURCE_EXHAUSTED: etcdserver: too many requests');

/** As pg rejects a query: a DatabaseError with the server's SQLSTATE. */
function postgresError(code: string): Error {
  const error = new pg.DatabaseError('could not extend file "base/16384/16385": No space left on device', 0, 'error');
  error.code = code;
  return error;
}

test("etcd's database space exceeded is a full store; its other RESOURCE_EXHAUSTED is not", () => {
  expect(isEtcdNoSpace(noSpace())).toBe(true);
  expect(isEtcdNoSpace(tooManyRequests())).toBe(false);
  expect(isEtcdNoSpace(new GRPCUnavailableError('14 UNAVAILABLE: No connection established'))).toBe(false);

  const full = storeFullOr(noSpace());
  expect(full).toBeInstanceOf(Errors.StoreFull);
  expect(full).toMatchObject({ status: 507, code: 'TV_STORE_FULL' });
  expect((full as Error).message).toMatch(/--quota-backend-bytes.*defragment.*etcdctl alarm disarm/);
  const other = tooManyRequests();
  expect(storeFullOr(other)).toBe(other);
});

test('PostgreSQL disk_full (SQLSTATE 53100) is a full store; the rest of class 53 is not', () => {
  expect(isPostgresDiskFull(postgresError('53100'))).toBe(true);
  for (const code of ['53000', '53200', '53300', '53400', '08006', '40001'])
    expect(isPostgresDiskFull(postgresError(code))).toBe(false);
  expect(isPostgresDiskFull(undefined)).toBe(false);

  const full = storeFullOr(postgresError('53100'));
  expect(full).toBeInstanceOf(Errors.StoreFull);
  expect((full as Error).message).toMatch(/PostgreSQL is out of disk space.*frees or grows the disk/);
  const outOfMemory = postgresError('53200');
  expect(storeFullOr(outOfMemory)).toBe(outOfMemory);
  const already = new Errors.StoreFull();
  expect(storeFullOr(already)).toBe(already);
});

test('a full etcd does not open the circuit breaker, and etcd3 does not take it for a transient failure', async () => {
  const breaker = hostBreaker({ failures: 3, openMs: 60_000 });
  for (let i = 0; i < 5; i++) {
    const refused = await breaker
      .execute(() => {
        throw noSpace();
      })
      .catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(Errors.StoreFull);
    // etcd3 closes an endpoint's connections on a recoverable error, and its pool passes a typed error on as it is.
    expect(isRecoverableError(refused as Error)).toBe(false);
  }
  // Still closed: the next call reaches etcd (reads work on a full etcd).
  await expect(breaker.execute(async () => 'read')).resolves.toBe('read');

  // An endpoint that does not answer still opens it.
  for (let i = 0; i < 3; i++)
    await breaker
      .execute(() => {
        throw new GRPCUnavailableError('14 UNAVAILABLE');
      })
      .catch(() => undefined);
  await expect(breaker.execute(async () => 'read')).rejects.toMatchObject({ isBrokenCircuitError: true });
});
