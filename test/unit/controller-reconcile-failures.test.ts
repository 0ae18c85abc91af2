// How reconcilers report failures, on fakes for the vault client and the Kubernetes side (the envtest tier runs the
// real ones): an unreachable vault goes back through the work queue's per-object backoff (the wait grows with each
// failure, up to the cap) while the Ready condition says why; a formula still used by reactors is recognised by its
// problem code, not by the wording of its detail; a create refused by a per-tenant limit is Ready=False LimitReached
// with the API's detail, and is a failed reconcile retried with the work queue's backoff (room can come without a
// change to the object); any other refusal is terminal (VaultRefused: retried only when the object changes).
import { afterEach, beforeEach, describe, expect, jest, test } from '@jest/globals';
import { TerminalError, WorkQueue } from '../../src/controller/queue.js';
import type { ReconcileContext } from '../../src/controller/manager.js';
import { applicationReconciler, type ApplicationObject } from '../../src/controller/reconcilers/application.js';
import { formulaReconciler, type FormulaObject } from '../../src/controller/reconcilers/formula.js';
import { proxyReconciler, type ProxyObject } from '../../src/controller/reconcilers/proxy.js';
import { reactorReconciler, type ReactorObject } from '../../src/controller/reconcilers/reactor.js';
import {
  fetchOrCreate,
  FINALIZER,
  reportingFailures,
  SpecError,
  writeStatus,
  type VaultObject,
} from '../../src/controller/reconcilers/common.js';
import {
  VaultRefused,
  VaultUnavailable,
  type VaultClient,
  type VaultRequest,
} from '../../src/controller/vault-client.js';
import type { Condition } from '../../src/controller/conditions.js';

/** A ReconcileContext whose Kubernetes writes land in plain arrays. */
function fakeContext<T extends VaultObject>(object: T, cached: Record<string, VaultObject> = {}) {
  const statuses: Array<{ conditions?: Condition[] }> = [];
  const events: Array<{ type: string; reason: string }> = [];
  const patches: Array<Record<string, unknown>> = [];
  const ctx = {
    key: { kind: object.kind!, namespace: object.metadata?.namespace, name: object.metadata!.name! },
    object,
    attempt: 0,
    signal: new AbortController().signal,
    logger: undefined as never,
    client: undefined as never,
    get: (kind: string, namespace: string | undefined, name: string) => cached[`${kind}/${namespace}/${name}`],
    list: () => [],
    readSecret: async () => undefined,
    patchStatus: async (status: Record<string, unknown>) => {
      statuses.push(status);
      object.status = { ...object.status, ...(status as VaultObject['status']) };
      return object;
    },
    patch: async (patch: Record<string, unknown>) => {
      patches.push(patch);
      return object;
    },
    event: async (type: string, reason: string) => {
      events.push({ type, reason });
    },
    events: undefined as never,
    references: { set: () => undefined, clear: () => undefined },
  } as unknown as ReconcileContext<T>;
  const readyReason = () => statuses.at(-1)?.conditions?.find((c) => c.type === 'Ready')?.reason;
  return { ctx, statuses, events, patches, readyReason };
}

/** The Ready Tenant the objects below refer to, as the informer's cache holds it. */
const tenant: VaultObject = {
  kind: 'Tenant',
  metadata: { name: 'acme', namespace: 'acme' },
  spec: {},
  status: {
    id: 'tenant-1',
    conditions: [{ type: 'Ready', status: 'True', reason: 'Reconciled', message: '', lastTransitionTime: '' }],
  },
};

describe('an unreachable vault', () => {
  beforeEach(() => {
    jest.useFakeTimers();
  });
  afterEach(() => {
    jest.useRealTimers();
  });

  test('backs off per object, doubling each failure up to the cap, while Ready=False says ApiUnavailable', async () => {
    const object: VaultObject = {
      kind: 'Application',
      metadata: { name: 'shop', namespace: 'acme', generation: 1 },
      spec: {},
    };
    const fake = fakeContext(object);
    const delays: number[] = [];
    const attempts: number[] = [];
    const queue = new WorkQueue({
      backoff: { baseMs: 1000, maxMs: 8000, jitter: 0 },
      process: async (_key, info) => {
        attempts.push(info.attempt);
        return reportingFailures(fake.ctx, object, async () => {
          throw new VaultUnavailable('the vault API at http://127.0.0.1:1 did not answer (ECONNREFUSED)');
        });
      },
      onError: (_key, _error, _failures, retryInMs) => delays.push(retryInMs!),
    });
    queue.start();
    queue.add('Application/acme/shop');
    for (let i = 0; i < 6; i++) await jest.advanceTimersByTimeAsync(10_000);
    await queue.stop();

    expect(fake.readyReason()).toBe('ApiUnavailable');
    // Each failure counts: the attempt number grows and the wait doubles up to the cap (not a retry every second).
    expect(attempts.slice(0, 5)).toEqual([0, 1, 2, 3, 4]);
    expect(delays.slice(0, 5)).toEqual([1000, 2000, 4000, 8000, 8000]);
  });

  test('a success after the outage resets the backoff', async () => {
    const object: VaultObject = {
      kind: 'Application',
      metadata: { name: 'shop', namespace: 'acme', generation: 1 },
      spec: {},
    };
    const fake = fakeContext(object);
    let down = true;
    const attempts: number[] = [];
    const queue = new WorkQueue({
      backoff: { baseMs: 1000, maxMs: 8000, jitter: 0 },
      process: async (_key, info) => {
        attempts.push(info.attempt);
        return reportingFailures(fake.ctx, object, async () => {
          if (down) throw new VaultUnavailable('the vault API answered 503');
        });
      },
    });
    queue.start();
    queue.add('Application/acme/shop');
    await jest.advanceTimersByTimeAsync(4_000); // attempts 0, 1 (after 1 s), 2 (after 2 more s)
    down = false;
    await jest.advanceTimersByTimeAsync(5_000);
    expect(queue.failures('Application/acme/shop')).toBe(0);
    queue.add('Application/acme/shop');
    await jest.advanceTimersByTimeAsync(10);
    await queue.stop();
    expect(attempts.at(-1)).toBe(0);
  });
});

describe('a formula still used by reactors', () => {
  function deletingFormula(): FormulaObject {
    return {
      kind: 'ReactorFormula',
      metadata: {
        name: 'card',
        namespace: 'acme',
        uid: '9b6f2f9e-3f5c-4d39-9a3c-7a0c1f1d2e3f',
        generation: 1,
        finalizers: [FINALIZER],
        deletionTimestamp: new Date(0),
      },
      spec: { tenantRef: { name: 'acme' }, code: 'module.exports = async () => ({})' },
    };
  }
  const vaultAnswering = (error: Error) => ({ call: async () => Promise.reject(error) }) as unknown as VaultClient;

  test('is recognised by its problem code: Ready=False InUse, the finalizer stays, polled again', async () => {
    const object = deletingFormula();
    const fake = fakeContext(object, { 'Tenant/acme/acme': tenant });
    // The detail's wording is the API's to change; the code is the contract.
    const refused = new VaultRefused(409, 'Still needed by 2 reactors: a, b.', undefined, 'TV_FORMULA_IN_USE');
    const result = await formulaReconciler(vaultAnswering(refused)).reconcile(fake.ctx.key, fake.ctx);
    expect(fake.readyReason()).toBe('InUse');
    expect(fake.events).toContainEqual({ type: 'Warning', reason: 'InUse' });
    expect(fake.patches).toEqual([]); // the finalizer was not removed
    expect(result).toEqual({ requeueAfterMs: 15_000 });
  });

  test('another conflict is not mistaken for it, whatever its wording', async () => {
    const object = deletingFormula();
    const fake = fakeContext(object, { 'Tenant/acme/acme': tenant });
    const refused = new VaultRefused(
      409,
      'The formula is used by nobody but was changed; retry.',
      undefined,
      'TV_CONFLICT',
    );
    await expect(formulaReconciler(vaultAnswering(refused)).reconcile(fake.ctx.key, fake.ctx)).rejects.toBeInstanceOf(
      TerminalError,
    );
    expect(fake.readyReason()).toBe('VaultRefused');
  });
});

describe('a resync of an unchanged object', () => {
  test('writes no status, although kube-apiserver answers with condition keys in alphabetical order', async () => {
    // As kube-apiserver returns it: each condition's members sorted by name (it decodes status into a map).
    const object: VaultObject = {
      kind: 'Reactor',
      metadata: { name: 'r', namespace: 'acme', generation: 3 },
      spec: {},
      status: {
        conditions: [
          {
            lastTransitionTime: '2026-11-25T12:00:00Z',
            message: 'The vault resource matches the spec.',
            observedGeneration: 3,
            reason: 'Reconciled',
            status: 'True',
            type: 'Ready',
          },
        ],
        id: 'reactor-1',
        observedGeneration: 3,
      },
    };
    const fake = fakeContext(object);
    await writeStatus(
      fake.ctx,
      object,
      { type: 'Ready', status: 'True', reason: 'Reconciled', message: 'The vault resource matches the spec.' },
      'reactor-1',
    );
    expect(fake.statuses).toEqual([]);

    // A real change is still written, and keeps the transition time.
    await writeStatus(
      fake.ctx,
      object,
      { type: 'Ready', status: 'True', reason: 'Reconciled', message: 'other' },
      'reactor-1',
    );
    expect(fake.statuses).toHaveLength(1);
    expect(fake.statuses[0].conditions?.[0]).toMatchObject({
      message: 'other',
      lastTransitionTime: '2026-11-25T12:00:00Z',
    });
  });
});

describe('the vault resource of a new object', () => {
  const recording = (answers: Record<string, () => unknown>) => {
    const calls: string[] = [];
    const vault = {
      call: async (method: string) => {
        calls.push(method);
        return answers[method]();
      },
    } as unknown as VaultClient;
    return { vault, calls };
  };
  const target = { collection: '/reactors', id: 'uid-1', noun: 'reactor' };
  const request = { tenantId: 't', managedBy: 'm' };

  test('is created without a read first when the status names no vault id yet', async () => {
    const object: VaultObject = { kind: 'Reactor', metadata: { name: 'r', namespace: 'acme', uid: 'uid-1' }, spec: {} };
    const { vault, calls } = recording({ POST: () => ({ id: 'uid-1' }) });
    expect(await fetchOrCreate(fakeContext(object).ctx, vault, target, request, {})).toEqual({ id: 'uid-1' });
    expect(calls).toEqual(['POST']);
  });

  test('is read again when the create finds it exists (409)', async () => {
    const object: VaultObject = { kind: 'Reactor', metadata: { name: 'r', namespace: 'acme', uid: 'uid-1' }, spec: {} };
    const { vault, calls } = recording({
      POST: () => Promise.reject(new VaultRefused(409, 'exists')),
      GET: () => ({ id: 'uid-1', name: 'old' }),
    });
    expect(await fetchOrCreate(fakeContext(object).ctx, vault, target, request, {})).toEqual({
      id: 'uid-1',
      name: 'old',
    });
    expect(calls).toEqual(['POST', 'GET']);
  });

  test('of a known object is read, not created', async () => {
    const object: VaultObject = {
      kind: 'Reactor',
      metadata: { name: 'r', namespace: 'acme', uid: 'uid-1' },
      spec: {},
      status: { id: 'uid-1' },
    };
    const { vault, calls } = recording({ GET: () => ({ id: 'uid-1' }) });
    await fetchOrCreate(fakeContext(object).ctx, vault, target, request, {});
    expect(calls).toEqual(['GET']);
  });
});

describe('a create refused by a per-tenant limit', () => {
  /** A vault where the object's resource does not exist and creating it answers the limit's 409. */
  const vaultAtLimit = (refused: VaultRefused) =>
    ({
      call: async (method: string, _path: string, request: VaultRequest = {}) => {
        if (method === 'POST') throw refused;
        if (method === 'GET' && request.allowMissing) return undefined;
        throw new VaultRefused(404, 'The resource was not found.', undefined, 'TV_NOT_FOUND');
      },
    }) as unknown as VaultClient;
  const readyMessage = (fake: ReturnType<typeof fakeContext>) =>
    fake.statuses.at(-1)?.conditions?.find((c) => c.type === 'Ready')?.message;

  test("an Application is Ready=False LimitReached with the API's detail, naming the setting", async () => {
    const object: ApplicationObject = {
      kind: 'Application',
      metadata: { name: 'shop', namespace: 'acme', uid: '0e1f2a3b-4c5d-4e6f-8a9b-0c1d2e3f4a5b', generation: 1 },
      spec: { tenantRef: { name: 'acme' }, type: 'private', keySecretRef: { name: 'shop-key' } },
    };
    const fake = fakeContext(object, { 'Tenant/acme/acme': tenant });
    const detail =
      'The tenant has 3 applications, as many as allowed (TOKENVAULT_APPLICATIONS_PER_TENANT = 3); delete one first.';
    const refused = new VaultRefused(409, detail, undefined, 'TV_APPLICATION_LIMIT');
    // Back to the work queue's backoff (an error, not terminal), since room can come without a change to the object.
    await expect(applicationReconciler(vaultAtLimit(refused)).reconcile(fake.ctx.key, fake.ctx)).rejects.toBe(refused);
    expect(fake.readyReason()).toBe('LimitReached');
    expect(readyMessage(fake)).toBe(detail);
    expect(fake.events).toContainEqual({ type: 'Warning', reason: 'LimitReached' });
  });

  test("a Reactor is Ready=False LimitReached with the API's detail, naming the setting", async () => {
    const object: ReactorObject = {
      kind: 'Reactor',
      metadata: { name: 'echo', namespace: 'acme', uid: '1e1f2a3b-4c5d-4e6f-8a9b-0c1d2e3f4a5b', generation: 1 },
      spec: { tenantRef: { name: 'acme' }, code: 'module.exports = async () => ({ raw: {} });' },
    };
    const fake = fakeContext(object, { 'Tenant/acme/acme': tenant });
    const detail =
      'The tenant has 3 reactors, as many as allowed (TOKENVAULT_REACTORS_PER_TENANT = 3); delete one first.';
    const refused = new VaultRefused(409, detail, undefined, 'TV_REACTOR_LIMIT');
    await expect(reactorReconciler(vaultAtLimit(refused)).reconcile(fake.ctx.key, fake.ctx)).rejects.toBe(refused);
    expect(fake.readyReason()).toBe('LimitReached');
    expect(readyMessage(fake)).toBe(detail);
    expect(fake.events).toContainEqual({ type: 'Warning', reason: 'LimitReached' });
  });

  test('a Proxy and a ReactorFormula are Ready=False LimitReached too', async () => {
    const proxy: ProxyObject = {
      kind: 'Proxy',
      metadata: { name: 'echo', namespace: 'acme', uid: '2e1f2a3b-4c5d-4e6f-8a9b-0c1d2e3f4a5b', generation: 1 },
      spec: { tenantRef: { name: 'acme' }, destinationUrl: 'https://example.com/', keySecretRef: { name: 'echo-key' } },
    };
    const formula: FormulaObject = {
      kind: 'ReactorFormula',
      metadata: { name: 'card', namespace: 'acme', uid: '3e1f2a3b-4c5d-4e6f-8a9b-0c1d2e3f4a5b', generation: 1 },
      spec: { tenantRef: { name: 'acme' }, code: 'module.exports = async () => ({})' },
    };
    const proxyFake = fakeContext(proxy, { 'Tenant/acme/acme': tenant });
    const proxyLimit = new VaultRefused(409, 'The tenant has 3 proxies ...', undefined, 'TV_PROXY_LIMIT');
    await expect(proxyReconciler(vaultAtLimit(proxyLimit)).reconcile(proxyFake.ctx.key, proxyFake.ctx)).rejects.toBe(
      proxyLimit,
    );
    expect(proxyFake.readyReason()).toBe('LimitReached');
    const formulaFake = fakeContext(formula, { 'Tenant/acme/acme': tenant });
    const formulaLimit = new VaultRefused(409, 'The tenant has 3 private ...', undefined, 'TV_FORMULA_LIMIT');
    await expect(
      formulaReconciler(vaultAtLimit(formulaLimit)).reconcile(formulaFake.ctx.key, formulaFake.ctx),
    ).rejects.toBe(formulaLimit);
    expect(formulaFake.readyReason()).toBe('LimitReached');
  });

  test('is an error (retried with the backoff); any other refusal, and a SpecError, are terminal', async () => {
    const object: VaultObject = {
      kind: 'Reactor',
      metadata: { name: 'echo', namespace: 'acme', generation: 1 },
      spec: {},
    };
    const fake = fakeContext(object);
    const limit = new VaultRefused(409, 'The tenant has 3 reactors ...', undefined, 'TV_REACTOR_LIMIT');
    await expect(reportingFailures(fake.ctx, object, () => Promise.reject(limit))).rejects.toBe(limit);
    for (const refused of [
      new VaultRefused(400, 'The request body is invalid.', undefined, 'TV_INVALID_BODY'),
      new VaultRefused(409, 'exists', undefined, 'TV_CONFLICT'),
    ]) {
      const thrown = await reportingFailures(fake.ctx, object, () => Promise.reject(refused)).catch((e: unknown) => e);
      expect(thrown).toBeInstanceOf(TerminalError);
      expect((thrown as TerminalError).cause).toBe(refused);
      expect(fake.readyReason()).toBe('VaultRefused');
    }
    const spec = new SpecError('InvalidSpec', 'spec.tenantRef.name is required.');
    await expect(reportingFailures(fake.ctx, object, () => Promise.reject(spec))).rejects.toBeInstanceOf(TerminalError);
    expect(fake.readyReason()).toBe('InvalidSpec');
  });

  describe('in the work queue', () => {
    beforeEach(() => {
      jest.useFakeTimers();
    });
    afterEach(() => {
      jest.useRealTimers();
    });

    test('waits longer after each refusal, up to the cap, each a failed reconcile', async () => {
      const object: VaultObject = { kind: 'Reactor', metadata: { name: 'echo', namespace: 'acme' }, spec: {} };
      const fake = fakeContext(object);
      const limit = new VaultRefused(409, 'The tenant has 3 reactors ...', undefined, 'TV_REACTOR_LIMIT');
      const attempts: number[] = [];
      const errors: unknown[] = [];
      const queue = new WorkQueue({
        backoff: { baseMs: 1000, maxMs: 4000, jitter: 0 },
        process: async (_key, info) => {
          attempts.push(info.attempt);
          return reportingFailures(fake.ctx, object, () => Promise.reject(limit));
        },
        // The manager logs failures here (and counts them as reconcile errors as they are thrown).
        onError: (_key, error) => errors.push(error),
      });
      queue.start();
      queue.add('Reactor/acme/echo');
      await jest.advanceTimersByTimeAsync(16_000); // tries at 0, 1, 3, 7, 11, 15 s
      await queue.stop();
      expect(attempts).toEqual([0, 1, 2, 3, 4, 5]);
      expect(errors).toEqual([limit, limit, limit, limit, limit, limit]);
      expect(fake.readyReason()).toBe('LimitReached');
    });
  });
});
