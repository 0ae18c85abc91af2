// The asynchronous reactor queue of one API process: tenants take turns for the run slots, so one tenant's backlog
// does not hold back another's request; a stop fails what had not started; a run that fails at a documented limit is
// reported for tokenvault_limit_refusals_total, as the synchronous answer is. The reactor service is a fake that records
// the order invocations start in (the real path is covered by test/integration/async-reactors.test.ts).
import { afterEach, expect, test } from '@jest/globals';
import type { TenantPrincipal } from '../../src/auth/principal.js';
import { Errors } from '../../src/errors/registry.js';
import { AsyncReactorService } from '../../src/domain/reactors/async.js';
import { CustomResponse, type ReactorService } from '../../src/domain/reactors/service.js';
import type { DataCipher } from '../../src/domain/tokens/records.js';
import { MemoryStore } from '../../src/store/memory.js';

const cipher: DataCipher = {
  encrypt: async (_tenant, _aad, plaintext) => Buffer.from(plaintext).toString('base64'),
  decrypt: async (_tenant, _aad, sealed) => Buffer.from(sealed, 'base64'),
  decryptFromClient: async (_tenant, _aad, sealed) => Buffer.from(sealed, 'base64'),
  fingerprint: async (_tenant, input) => input,
  searchHash: async (_tenant, input) => input,
};

const principal = (tenantId: string): TenantPrincipal => ({
  kind: 'application',
  tenantId,
  applicationId: `app-${tenantId}`,
  applicationType: 'private',
  permissions: new Set(['token:use']),
  rules: [],
});

let service: AsyncReactorService | undefined;
afterEach(async () => {
  await service?.stop();
});

function fakeReactors(started: string[], gate: Promise<void>) {
  return {
    nameOf: async () => 'r',
    react: async (p: TenantPrincipal, _id: string, args: { n: number }) => {
      started.push(`${p.tenantId}${args.n}`);
      await gate;
      return { raw: args };
    },
  } as unknown as ReactorService;
}

test('tenants take turns: a tenant with one request runs before the rest of a backlog queued earlier', async () => {
  const started: string[] = [];
  let open!: () => void;
  const gate = new Promise<void>((resolve) => (open = resolve));
  service = new AsyncReactorService(new MemoryStore(), cipher, fakeReactors(started, gate), {
    resultTtlSeconds: 60,
    queueLength: 10,
    concurrency: 1,
    queueBytes: 1 << 20,
    runnerLeaseSeconds: 30,
  });
  await service.start();
  const reactorId = '00000000-0000-4000-8000-000000000001';
  for (let n = 1; n <= 4; n++) await service.submit(principal('a'), reactorId, { n }, async () => principal('a'));
  await service.submit(principal('b'), reactorId, { n: 1 }, async () => principal('b'));
  expect(service.usage()).toEqual({ queued: 4, running: 1 });
  open();
  for (let i = 0; i < 100 && started.length < 5; i++) await new Promise((resolve) => setTimeout(resolve, 5));
  // a1 was running when b1 arrived; b1 goes next, before a2–a4.
  expect(started).toEqual(['a1', 'b1', 'a2', 'a3', 'a4']);
});

test('stop fails what had not started; the results say so', async () => {
  const store = new MemoryStore();
  const started: string[] = [];
  let open!: () => void;
  const gate = new Promise<void>((resolve) => (open = resolve));
  service = new AsyncReactorService(store, cipher, fakeReactors(started, gate), {
    resultTtlSeconds: 60,
    queueLength: 10,
    concurrency: 1,
    queueBytes: 1 << 20,
    runnerLeaseSeconds: 30,
  });
  await service.start();
  const reactorId = '00000000-0000-4000-8000-000000000001';
  const running = await service.submit(principal('a'), reactorId, { n: 1 }, async () => principal('a'));
  const waiting = await service.submit(principal('a'), reactorId, { n: 2 }, async () => principal('a'));
  const stopping = service.stop();
  open();
  await stopping;
  const reader = new AsyncReactorService(store, cipher, fakeReactors([], gate), {
    resultTtlSeconds: 60,
    queueLength: 10,
    concurrency: 1,
    queueBytes: 1 << 20,
    runnerLeaseSeconds: 30,
  });
  expect(await reader.get(principal('a'), reactorId, running)).toMatchObject({
    status: 'completed',
    result: { raw: { n: 1 } },
  });
  expect(await reader.get(principal('a'), reactorId, waiting)).toMatchObject({
    status: 'failed',
    error: { status: 503, body: { code: 'TV_ASYNC_REQUEST_LOST' } },
  });
  expect(started).toEqual(['a1']);
  service = undefined;
});

test('a run that fails at a limit is reported with its code, once; other failures and custom responses are not', async () => {
  const failures: Record<number, Error> = {
    1: new Errors.ReactorResultTooLarge(),
    2: new Errors.RuntimeBusy(),
    3: new Errors.NotFound('Token not found.'),
    // The code's own response: its body is the reactor's, whatever code it names.
    4: new CustomResponse(429, {}, { code: 'TV_RATE_LIMITED' }),
  };
  const reactors = {
    nameOf: async () => 'r',
    react: async (_p: TenantPrincipal, _id: string, args: { n: number }) => {
      throw failures[args.n];
    },
  } as unknown as ReactorService;
  const refusals: string[] = [];
  const outcomes: string[] = [];
  service = new AsyncReactorService(
    new MemoryStore(),
    cipher,
    reactors,
    { resultTtlSeconds: 60, queueLength: 10, concurrency: 1, queueBytes: 1 << 20, runnerLeaseSeconds: 30 },
    (outcome) => outcomes.push(outcome),
    (code) => refusals.push(code),
  );
  await service.start();
  const reactorId = '00000000-0000-4000-8000-000000000001';
  const ids: string[] = [];
  for (let n = 1; n <= 4; n++)
    ids.push(await service.submit(principal('a'), reactorId, { n }, async () => principal('a')));
  for (let i = 0; i < 100 && outcomes.filter((o) => o === 'failed').length < 4; i++)
    await new Promise((resolve) => setTimeout(resolve, 5));
  expect(refusals).toEqual(['TV_REACTOR_RESULT_TOO_LARGE', 'TV_RUNTIME_BUSY']);
  // Reading a result counts nothing more.
  await service.get(principal('a'), reactorId, ids[0]);
  expect(refusals).toHaveLength(2);
});
