// The controller machinery (src/controller/: informer, manager, leader election, status and event helpers, and the
// controller process's health and metrics server) against a real kube-apiserver from test/support/control-plane.ts.
// ConfigMaps stand in for the custom resources, so these tests do not depend on crds/; the status subresource is
// exercised on a CRD defined here.
//
// Connection failures are made real with a TCP relay between the client and kube-apiserver (TLS passes through it
// untouched): it can drop every connection, refuse new ones, or freeze the open ones (bytes stop flowing, sockets
// stay open), which is what a stalled watch looks like.

import { execFile, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { readdir, readFile } from 'node:fs/promises';
import net from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, test } from '@jest/globals';
import { KubeConfig } from '@kubernetes/client-node';
import { Etcd3 } from 'etcd3';
import pino from 'pino';
import { loadConfig } from '../../src/config/config.js';
import { setCondition, notReady, findCondition, type Condition } from '../../src/controller/conditions.js';
import { EventRecorder } from '../../src/controller/events.js';
import { Informer } from '../../src/controller/informer.js';
import { KubeClient, Resources, type KubeObject, type ResourceRef } from '../../src/controller/kube.js';
import {
  Manager,
  patchStatus,
  type ObjectKey,
  type Reconciler,
  type ReconcileContext,
} from '../../src/controller/manager.js';
import { ControllerMetrics } from '../../src/controller/metrics.js';
import { startController, type RunningController } from '../../src/server/controller.js';
import { startControlPlane, type ControlPlane } from '../support/control-plane.js';
import { freeLoopbackPort } from '../support/ports.js';
import { eventually, sleep } from '../support/wait.js';

const logger = pino({ level: process.env.TEST_LOG_LEVEL ?? 'silent' });

let controlPlane: ControlPlane;
let admin: KubeClient;
const cleanups: Array<() => Promise<void> | void> = [];

beforeAll(async () => {
  controlPlane = await startControlPlane();
  admin = await KubeClient.fromKubeConfig(controlPlane.kubeConfig());
}, 180_000);

afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
}, 30_000);

afterAll(async () => {
  admin?.close();
  await controlPlane?.stop();
}, 30_000);

// --- helpers ----------------------------------------------------------------------------------------------------

let namespaceCount = 0;
async function freshNamespace(): Promise<string> {
  const name = `cm-test-${process.pid}-${++namespaceCount}`;
  await admin.create(Resources.namespaces, undefined, { metadata: { name } });
  return name;
}

function createConfigMap(namespace: string, name: string, data: Record<string, string> = {}): Promise<KubeObject> {
  return admin.create(Resources.configMaps, namespace, { metadata: { name }, data });
}

function updateConfigMap(namespace: string, name: string, data: Record<string, string>): Promise<KubeObject> {
  return admin.patch(Resources.configMaps, namespace, name, { data });
}

function deleteConfigMap(namespace: string, name: string): Promise<unknown> {
  return admin.delete(Resources.configMaps, namespace, name);
}

async function client(options: { via?: TcpRelay } = {}): Promise<KubeClient> {
  let config = controlPlane.kubeConfig();
  if (options.via) config = pointAt(config, options.via.url);
  const made = await KubeClient.fromKubeConfig(config, { timeoutMs: 5_000 });
  cleanups.push(() => made.close());
  return made;
}

/** A copy of a kubeconfig with another server URL (the relay: same certificate, 127.0.0.1 is in its SANs). */
function pointAt(config: KubeConfig, server: string): KubeConfig {
  const copy = new KubeConfig();
  copy.loadFromOptions({
    clusters: config.clusters.map((cluster) => ({ ...cluster, server })),
    users: config.users,
    contexts: config.contexts,
    currentContext: config.currentContext,
  });
  return copy;
}

/** Records what an informer reports, as "add name", "update name", "delete name". */
function recorder(informer: Informer) {
  const seen: string[] = [];
  informer.addHandlers({
    onAdd: (o) => seen.push(`add ${o.metadata?.name}`),
    onUpdate: (_p, o) => seen.push(`update ${o.metadata?.name}`),
    onDelete: (o) => seen.push(`delete ${o.metadata?.name}`),
  });
  return seen;
}

function startInformer(
  kube: KubeClient,
  namespace: string,
  options: ConstructorParameters<typeof Informer>[2] = {},
): Informer {
  const informer = new Informer(kube, Resources.configMaps, {
    namespace,
    logger,
    backoff: { initialMs: 100, maxMs: 1000 },
    ...options,
  });
  cleanups.push(() => informer.stop());
  return informer;
}

/**
 * Compacts the control plane's etcd at its current revision, so that older resourceVersions are gone for good (as
 * kube-apiserver's own compaction, every 5 minutes, does in a real cluster). The harness does not expose etcd's
 * address, so it is read from the kube-apiserver's command line (this test's own child process).
 */
async function compactEtcd(): Promise<void> {
  const port = new URL(controlPlane.server).port;
  let endpoint: string | undefined;
  for (const pid of await readdir('/proc')) {
    if (!/^\d+$/.test(pid)) continue;
    const args = await readFile(`/proc/${pid}/cmdline`, 'utf8').then(
      (text) => text.split('\0'),
      () => [] as string[],
    );
    if (!args[0]?.endsWith('kube-apiserver') || !args.includes(`--secure-port=${port}`)) continue;
    endpoint = args
      .find((arg) => arg.startsWith('--etcd-servers='))
      ?.slice('--etcd-servers='.length)
      .split(',')[0];
  }
  if (!endpoint) throw new Error(`no kube-apiserver with --secure-port=${port} in /proc`);
  const etcd = new Etcd3({ hosts: endpoint });
  try {
    const { header } = await etcd.kv.range({ key: Buffer.from('/') });
    await etcd.kv.compact({ revision: header.revision, physical: true });
  } finally {
    etcd.close();
  }
}

/** A TCP relay to kube-apiserver whose connections the test can drop, refuse or freeze. */
class TcpRelay {
  private readonly pairs = new Set<{ client: net.Socket; upstream: net.Socket }>();
  private refusing = false;
  connections = 0;

  private constructor(
    private readonly server: net.Server,
    readonly url: string,
  ) {}

  static async start(target: string): Promise<TcpRelay> {
    const { hostname, port } = new URL(target);
    // eslint-disable-next-line prefer-const -- the server's callback refers to it before it is assigned
    let relay!: TcpRelay;
    const server = net.createServer((clientSocket) => relay.accept(clientSocket, hostname, Number(port)));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    relay = new TcpRelay(server, `https://127.0.0.1:${(server.address() as net.AddressInfo).port}`);
    cleanups.push(() => relay.close());
    return relay;
  }

  private accept(clientSocket: net.Socket, host: string, port: number): void {
    if (this.refusing) {
      clientSocket.destroy();
      return;
    }
    this.connections++;
    const upstream = net.connect(port, host);
    const pair = { client: clientSocket, upstream };
    this.pairs.add(pair);
    const end = () => {
      clientSocket.destroy();
      upstream.destroy();
      this.pairs.delete(pair);
    };
    clientSocket.on('data', (chunk) => upstream.write(chunk));
    upstream.on('data', (chunk) => clientSocket.write(chunk));
    for (const socket of [clientSocket, upstream]) {
      socket.on('error', end);
      socket.on('close', end);
    }
  }

  /** Drops every open connection (as a restarted apiserver or a broken network would). */
  dropAll(): void {
    for (const { client, upstream } of this.pairs) {
      client.destroy();
      upstream.destroy();
    }
    this.pairs.clear();
  }

  /** Open connections stop carrying bytes but stay open; new connections work. */
  freezeOpen(): void {
    for (const { client, upstream } of this.pairs) {
      client.pause();
      upstream.pause();
      client.removeAllListeners('data');
      upstream.removeAllListeners('data');
    }
  }

  /** Drops every connection and refuses new ones until allow(). */
  refuse(): void {
    this.refusing = true;
    this.dropAll();
  }

  allow(): void {
    this.refusing = false;
  }

  async close(): Promise<void> {
    this.refuse();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}

/** A Reconciler of ConfigMaps that records its calls. */
function configMapReconciler(
  name: string,
  body: (key: ObjectKey, ctx: ReconcileContext) => Promise<{ requeueAfterMs?: number } | void> = async () => undefined,
  extra: Partial<Reconciler> = {},
) {
  const calls: Array<{ key: string; attempt: number; exists: boolean; by: string }> = [];
  const reconciler: Reconciler = {
    kind: 'ConfigMap',
    resource: Resources.configMaps,
    ...extra,
    async reconcile(key, ctx) {
      calls.push({
        key: `${key.namespace}/${key.name}`,
        attempt: ctx.attempt,
        exists: ctx.object !== undefined,
        by: name,
      });
      return body(key, ctx);
    },
  };
  return { reconciler, calls };
}

function startManager(
  options: Omit<ConstructorParameters<typeof Manager>[0], 'logger'> & { logger?: typeof logger },
): Manager {
  const manager = new Manager({ logger, informerBackoff: { initialMs: 100, maxMs: 1000 }, ...options });
  manager.start();
  cleanups.push(() => manager.stop());
  return manager;
}

// --- informer -----------------------------------------------------------------------------------------------------

describe('informer', () => {
  test('lists (in pages), then reports adds, updates and deletes, and keeps its cache by namespace/name', async () => {
    const namespace = await freshNamespace();
    const other = await freshNamespace();
    for (let i = 0; i < 7; i++) await createConfigMap(namespace, `pre-${i}`, { i: String(i) });
    await createConfigMap(other, 'elsewhere');
    const informer = startInformer(await client(), namespace, { pageSize: 3 });
    const seen = recorder(informer);
    informer.start();
    await informer.waitForSync(10_000);
    expect(informer.synced).toBe(true);
    expect(
      informer
        .list()
        .map((o) => o.metadata?.name)
        .sort(),
    ).toEqual([...Array(7).keys()].map((i) => `pre-${i}`));
    expect(seen.filter((s) => s.startsWith('add pre-'))).toHaveLength(7);
    expect(informer.get(other, 'elsewhere')).toBeUndefined(); // one namespace only
    expect(informer.get(namespace, 'pre-3')?.kind).toBe('ConfigMap'); // list items get kind and apiVersion
    seen.length = 0;

    await createConfigMap(namespace, 'live', { v: '1' });
    await eventually(async () => expect(seen).toEqual(['add live']), 5000);
    await updateConfigMap(namespace, 'live', { v: '2' });
    await eventually(async () => expect(seen).toEqual(['add live', 'update live']), 5000);
    expect((informer.get(namespace, 'live') as { data?: Record<string, string> }).data).toEqual({ v: '2' });
    await deleteConfigMap(namespace, 'live');
    await eventually(async () => expect(seen).toEqual(['add live', 'update live', 'delete live']), 5000);
    expect(informer.get(namespace, 'live')).toBeUndefined();
    expect(informer.stats.lists).toBe(1);
  });

  test('a dropped watch is resumed from the last resourceVersion: nothing missed, no relist', async () => {
    const namespace = await freshNamespace();
    const relay = await TcpRelay.start(controlPlane.server);
    const informer = startInformer(await client({ via: relay }), namespace);
    const seen = recorder(informer);
    informer.start();
    await informer.waitForSync(10_000);
    await sleep(200); // the watch is open

    // Down: every connection dropped, new ones refused. Changes made meanwhile arrive after reconnection.
    relay.refuse();
    await createConfigMap(namespace, 'while-down');
    await sleep(300);
    expect(seen).toEqual([]);
    relay.allow();
    await eventually(async () => expect(seen).toEqual(['add while-down']), 10_000);

    // Dropped once more; the watch is back at once.
    relay.dropAll();
    await createConfigMap(namespace, 'after-drop');
    await eventually(async () => expect(seen).toEqual(['add while-down', 'add after-drop']), 10_000);
    expect(informer.stats.lists).toBe(1);
    expect(informer.stats.ends.error + informer.stats.ends.closed).toBeGreaterThanOrEqual(2);
  }, 30_000);

  test('a stalled watch (connection open, nothing arriving) is restarted by the watchdog', async () => {
    const namespace = await freshNamespace();
    const relay = await TcpRelay.start(controlPlane.server);
    const informer = startInformer(await client({ via: relay }), namespace, { watchdogMs: 1500 });
    const seen = recorder(informer);
    informer.start();
    await informer.waitForSync(10_000);
    await sleep(200); // the watch is open

    relay.freezeOpen();
    const frozenAt = Date.now();
    await createConfigMap(namespace, 'during-stall');
    await sleep(500);
    expect(seen).toEqual([]); // the stalled watch delivers nothing
    await eventually(async () => expect(seen).toEqual(['add during-stall']), 10_000);
    const recoveredAfter = Date.now() - frozenAt;
    expect(informer.stats.ends.stalled).toBeGreaterThanOrEqual(1);
    expect(recoveredAfter).toBeGreaterThanOrEqual(1000);
    expect(recoveredAfter).toBeLessThan(6000);
    expect(informer.stats.lists).toBe(1); // resumed, not relisted
  }, 30_000);

  test('410 Gone (a compacted resourceVersion) relists, and the difference is reported', async () => {
    // Events: kube-apiserver keeps no watch cache for them (DefaultWatchCacheSizes), so their watches are served by
    // etcd and an old resourceVersion really is gone once etcd has compacted past it. (ConfigMaps' watch cache
    // holds every event since the apiserver started, far back enough for any resourceVersion in a fresh cluster.)
    const namespace = await freshNamespace();
    const event = (name: string, message: string) => ({
      metadata: { name },
      involvedObject: { kind: 'ConfigMap', name: 'x', namespace },
      reason: 'Test',
      message,
      type: 'Normal',
    });
    await admin.create(Resources.events, namespace, event('stays', 'one'));
    await admin.create(Resources.events, namespace, event('goes', 'one'));
    const relay = await TcpRelay.start(controlPlane.server);
    const informer = new Informer(await client({ via: relay }), Resources.events, {
      namespace,
      logger,
      backoff: { initialMs: 100, maxMs: 500 },
    });
    cleanups.push(() => informer.stop());
    const seen = recorder(informer);
    informer.start();
    await informer.waitForSync(10_000);
    await sleep(200);
    seen.length = 0;

    // A long outage: the controller misses changes, and etcd compacts past the last resourceVersion it saw.
    relay.refuse();
    await admin.delete(Resources.events, namespace, 'goes');
    await admin.create(Resources.events, namespace, event('new', 'one'));
    await admin.patch(Resources.events, namespace, 'stays', { message: 'two' });
    await compactEtcd();
    relay.allow();
    // The watch resumes from its resourceVersion, gets 410 Gone, lists again, and reports the difference.
    await eventually(async () => expect([...seen].sort()).toEqual(['add new', 'delete goes', 'update stays']), 10_000);
    expect(informer.stats.ends.gone).toBe(1);
    expect(informer.stats.lists).toBe(2);
    expect(
      informer
        .list()
        .map((o) => o.metadata?.name)
        .sort(),
    ).toEqual(['new', 'stays']);
    expect((informer.get(namespace, 'stays') as { message?: string }).message).toBe('two');

    // And it watches on from the new list.
    await admin.create(Resources.events, namespace, event('later', 'one'));
    await eventually(async () => expect(seen).toContain('add later'), 5000);
  }, 30_000);

  test('restartWatch() from an old resourceVersion that is still retained replays, without a relist', async () => {
    const namespace = await freshNamespace();
    const informer = startInformer(await client(), namespace);
    const seen = recorder(informer);
    informer.start();
    await informer.waitForSync(10_000);
    const start = informer.resourceVersion!;
    await createConfigMap(namespace, 'a');
    await eventually(async () => expect(seen).toEqual(['add a']), 5000);
    informer.restartWatch({ resourceVersion: start });
    // The ADDED event for a is delivered again: the cache already has it, so it is reported as an update.
    await eventually(async () => expect(seen).toEqual(['add a', 'update a']), 5000);
    expect(informer.stats.ends.requested).toBe(1);
    expect(informer.stats.lists).toBe(1);
  });

  test('metadata-only informers (Secrets) cache no data', async () => {
    const namespace = await freshNamespace();
    await admin.create(Resources.secrets, namespace, { metadata: { name: 's1' }, stringData: { password: 'hunter2' } });
    const informer = new Informer(await client(), Resources.secrets, { namespace, metadataOnly: true, logger });
    cleanups.push(() => informer.stop());
    const seen = recorder(informer);
    informer.start();
    await informer.waitForSync(10_000);
    const cached = informer.get(namespace, 's1')!;
    expect(cached.metadata?.name).toBe('s1');
    expect(JSON.stringify(cached)).not.toContain('hunter2');
    expect(cached).not.toHaveProperty('data');
    await admin.patch(Resources.secrets, namespace, 's1', { stringData: { password: 'changed' } });
    await eventually(async () => expect(seen).toContain('update s1'), 5000);
    expect(JSON.stringify(informer.get(namespace, 's1'))).not.toContain('changed');
  });
});

// --- manager ------------------------------------------------------------------------------------------------------

describe('manager', () => {
  test('reconciles each object, retries failures with backoff, honours requeueAfter, reconciles deletions', async () => {
    const namespace = await freshNamespace();
    await createConfigMap(namespace, 'ok');
    await createConfigMap(namespace, 'flaky');
    let flakyFailures = 0;
    const { reconciler, calls } = configMapReconciler('m', async (key) => {
      if (key.name === 'flaky' && flakyFailures < 2) {
        flakyFailures++;
        throw new Error('not yet');
      }
      if (key.name === 'poll') return { requeueAfterMs: 300 };
    });
    const metrics = new ControllerMetrics({ defaultMetrics: false });
    const manager = startManager({
      client: await client(),
      reconcilers: [reconciler],
      namespace,
      leaderElection: false,
      backoff: { baseMs: 100, maxMs: 1000, jitter: 0.5 },
      metrics,
    });
    await manager.waitForSync(10_000);
    await eventually(async () => {
      expect(calls.filter((c) => c.key === `${namespace}/ok`)).toHaveLength(1);
      expect(calls.filter((c) => c.key === `${namespace}/flaky`).map((c) => c.attempt)).toEqual([0, 1, 2]);
    }, 5000);

    await createConfigMap(namespace, 'poll');
    await eventually(
      async () => expect(calls.filter((c) => c.key === `${namespace}/poll`).length).toBeGreaterThanOrEqual(3),
      5000,
    );

    await deleteConfigMap(namespace, 'ok');
    await eventually(
      async () => expect(calls.filter((c) => c.key === `${namespace}/ok`).map((c) => c.exists)).toEqual([true, false]),
      5000,
    );

    const text = await metrics.registry.metrics();
    expect(text).toMatch(/tokenvault_controller_reconciles_total\{kind="ConfigMap",result="error"\} 2/);
    expect(text).toMatch(/tokenvault_controller_reconcile_errors_total\{kind="ConfigMap"\} 2/);
    expect(text).toMatch(/tokenvault_controller_reconciles_total\{kind="ConfigMap",result="requeue"\} \d+/);
    expect(text).toMatch(
      /tokenvault_controller_reconcile_duration_seconds_count\{kind="ConfigMap",result="success"\} \d+/,
    );
    expect(text).toMatch(/tokenvault_controller_queue_depth\{kind="ConfigMap"\} \d+/);
    expect(text).toMatch(/tokenvault_controller_leader 1/);
    expect(text).toMatch(/tokenvault_controller_informer_synced\{resource="configmaps"\} 1/);
  }, 30_000);

  test("each kind has its own queue: one kind's stuck reconciles do not hold up another kind", async () => {
    const namespace = await freshNamespace();
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    // ConfigMaps whose reconciles hang until the test lets them go, with one reconcile at a time per kind.
    const { reconciler: stuck } = configMapReconciler('stuck', () => released);
    const secretCalls: string[] = [];
    const secrets: Reconciler = {
      kind: 'Secret',
      resource: Resources.secrets,
      async reconcile(key) {
        secretCalls.push(key.name);
      },
    };
    const manager = startManager({
      client: await client(),
      reconcilers: [stuck, secrets],
      namespace,
      leaderElection: false,
      concurrency: 1,
    });
    cleanups.push(async () => release());
    await manager.waitForSync(10_000);
    await createConfigMap(namespace, 'slow-1');
    await createConfigMap(namespace, 'slow-2');
    await admin.create(Resources.secrets, namespace, { metadata: { name: 'quick' }, stringData: { a: 'b' } });
    await eventually(async () => expect(secretCalls).toContain('quick'), 5000);
    release();
  }, 30_000);

  test('a change to a referenced Secret requeues the objects that reference it', async () => {
    const namespace = await freshNamespace();
    await admin.create(Resources.secrets, namespace, { metadata: { name: 'creds' }, stringData: { token: 'one' } });
    await createConfigMap(namespace, 'uses-creds', { secret: 'creds' });
    await createConfigMap(namespace, 'uses-nothing');
    const values: string[] = [];
    const { reconciler, calls } = configMapReconciler(
      'm',
      async (key, ctx) => {
        const secretName = (ctx.object as { data?: Record<string, string> } | undefined)?.data?.secret;
        if (!secretName) {
          ctx.references.clear();
          return;
        }
        ctx.references.set([{ kind: 'Secret', namespace: key.namespace, name: secretName }]);
        const secret = await ctx.readSecret(key.namespace!, secretName);
        values.push(Buffer.from(secret?.data?.token ?? '', 'base64').toString());
        // The cache holds only the Secret's metadata.
        expect(ctx.get('Secret', key.namespace, secretName)).not.toHaveProperty('data');
      },
      { watchSecrets: true },
    );
    const manager = startManager({
      client: await client(),
      reconcilers: [reconciler],
      namespace,
      leaderElection: false,
    });
    await manager.waitForSync(10_000);
    await eventually(async () => expect(values).toEqual(['one']), 5000);
    const before = calls.filter((c) => c.key === `${namespace}/uses-nothing`).length;
    expect(manager.references.referrersOf(`Secret/${namespace}/creds`)).toEqual([`ConfigMap/${namespace}/uses-creds`]);

    await admin.patch(Resources.secrets, namespace, 'creds', { stringData: { token: 'two' } });
    await eventually(async () => expect(values).toEqual(['one', 'two']), 5000);
    expect(calls.filter((c) => c.key === `${namespace}/uses-nothing`)).toHaveLength(before);

    // Deleting the referrer forgets its references.
    await deleteConfigMap(namespace, 'uses-creds');
    await eventually(async () => expect(manager.references.referrersOf(`Secret/${namespace}/creds`)).toEqual([]), 5000);
  }, 30_000);

  test('objects without a generation (ConfigMaps) are requeued by every change', async () => {
    const namespace = await freshNamespace();
    const { reconciler, calls } = configMapReconciler('m');
    const manager = startManager({
      client: await client(),
      reconcilers: [reconciler],
      namespace,
      leaderElection: false,
    });
    await manager.waitForSync(10_000);
    // ConfigMaps have no generation: every change counts.
    await createConfigMap(namespace, 'a');
    await eventually(async () => expect(calls).toHaveLength(1), 5000);
    await updateConfigMap(namespace, 'a', { x: '1' });
    await eventually(async () => expect(calls).toHaveLength(2), 5000);
  }, 30_000);
});

// --- status subresource and events ---------------------------------------------------------------------------------

const widgets: ResourceRef = {
  group: 'machinery.test.tokenvault.dev',
  version: 'v1',
  plural: 'widgets',
  kind: 'Widget',
  namespaced: true,
};

describe('status and events', () => {
  beforeAll(async () => {
    await admin.create(
      {
        group: 'apiextensions.k8s.io',
        version: 'v1',
        plural: 'customresourcedefinitions',
        kind: 'CustomResourceDefinition',
        namespaced: false,
      },
      undefined,
      {
        metadata: { name: `${widgets.plural}.${widgets.group}` },
        spec: {
          group: widgets.group,
          scope: 'Namespaced',
          names: { kind: 'Widget', plural: 'widgets', singular: 'widget', listKind: 'WidgetList' },
          versions: [
            {
              name: 'v1',
              served: true,
              storage: true,
              subresources: { status: {} },
              schema: {
                openAPIV3Schema: {
                  type: 'object',
                  properties: {
                    spec: { type: 'object', properties: { size: { type: 'integer' } } },
                    status: { type: 'object', 'x-kubernetes-preserve-unknown-fields': true },
                  },
                },
              },
            },
          ],
        },
      },
    );
    await eventually(async () => {
      await admin.list(widgets, 'default');
    }, 20_000);
  }, 30_000);

  test('patchStatus writes the status subresource with a merge patch and leaves spec and generation alone', async () => {
    const namespace = await freshNamespace();
    const created = await admin.create(widgets, namespace, { metadata: { name: 'w' }, spec: { size: 3 } });
    const conditions = setCondition([], notReady('TenantNotFound', 'tenant "t" does not exist', 1));
    const patched = await patchStatus(admin, widgets, namespace, 'w', { observedGeneration: 1, conditions, id: 'abc' });
    expect(patched.status).toEqual({ observedGeneration: 1, conditions, id: 'abc' });
    // A second patch merges: id stays, conditions (an array) are replaced.
    const later = setCondition(conditions, {
      type: 'Ready',
      status: 'True',
      reason: 'Reconciled',
      observedGeneration: 1,
    });
    await patchStatus(admin, widgets, namespace, 'w', { conditions: later });
    const read = await admin.get<KubeObject & { spec: unknown; status: { id: string; conditions: Condition[] } }>(
      widgets,
      namespace,
      'w',
    );
    expect(read.spec).toEqual({ size: 3 });
    expect(read.metadata?.generation).toBe(created.metadata?.generation);
    expect(read.status.id).toBe('abc');
    expect(findCondition(read.status.conditions, 'Ready')?.status).toBe('True');
    // A stale resourceVersion precondition is refused.
    await expect(
      patchStatus(admin, widgets, namespace, 'w', { id: 'x' }, { resourceVersion: created.metadata!.resourceVersion }),
    ).rejects.toMatchObject({ status: 409 });
  });

  test('on the real Tenant CRD (crds/), the status written with the condition helpers is accepted and shown by kubectl', async () => {
    expect(controlPlane.crds).toContain('tenants.tokenvault.dev');
    const tenants: ResourceRef = {
      group: 'tokenvault.dev',
      version: 'v1alpha1',
      plural: 'tenants',
      kind: 'Tenant',
      namespaced: true,
    };
    const namespace = await freshNamespace();
    await admin.create(tenants, namespace, {
      metadata: { name: 'acme' },
      spec: { managementKeySecretRef: { name: 'acme-key' } },
    });
    let conditions = setCondition([], notReady('ApiUnavailable', 'the vault API does not answer', 1));
    await patchStatus(admin, tenants, namespace, 'acme', { observedGeneration: 1, conditions });
    conditions = setCondition(conditions, {
      type: 'Ready',
      status: 'True',
      reason: 'Reconciled',
      message: '',
      observedGeneration: 1,
    });
    await patchStatus(admin, tenants, namespace, 'acme', { id: '5b8c8f2e-8a1c-4d7e-9a53-0c1f3b6f2a10', conditions });
    const { stdout } = await controlPlane.kubectl(['get', 'tenants', '-n', namespace, '--no-headers']);
    expect(stdout).toMatch(/^acme\s+True\s+Reconciled\s+5b8c8f2e-8a1c-4d7e-9a53-0c1f3b6f2a10\s/);
    // The schema's rules hold: a condition without a reason is refused.
    await expect(
      patchStatus(admin, tenants, namespace, 'acme', { conditions: [{ ...conditions[0], reason: '' }] }),
    ).rejects.toMatchObject({ status: 422 });
  });

  test('a reconciler writes status through ctx.patchStatus, and its own status write does not requeue it', async () => {
    const namespace = await freshNamespace();
    const calls: number[] = [];
    const reconciler: Reconciler = {
      kind: 'Widget',
      resource: widgets,
      async reconcile(_key, ctx) {
        const object: (KubeObject & { status?: { conditions?: Condition[] } }) | undefined = ctx.object;
        if (!object) return;
        calls.push(object.metadata!.generation!);
        const conditions = setCondition(object.status?.conditions, {
          type: 'Ready',
          status: 'True',
          reason: 'Reconciled',
          observedGeneration: object.metadata!.generation,
        });
        await ctx.patchStatus({ observedGeneration: object.metadata!.generation, conditions });
      },
    };
    const manager = startManager({
      client: await client(),
      reconcilers: [reconciler],
      namespace,
      leaderElection: false,
    });
    await manager.waitForSync(10_000);
    await admin.create(widgets, namespace, { metadata: { name: 'w' }, spec: { size: 1 } });
    await eventually(async () => {
      const read = await admin.get<KubeObject & { status?: { observedGeneration?: number } }>(widgets, namespace, 'w');
      expect(read.status?.observedGeneration).toBe(1);
    }, 5000);
    await sleep(500);
    expect(calls).toEqual([1]); // the status write's MODIFIED event did not requeue
    await admin.patch(widgets, namespace, 'w', { spec: { size: 2 } });
    await eventually(async () => expect(calls).toEqual([1, 2]), 5000);
  }, 30_000);

  test("adding the reconciler's own finalizer does not requeue the object (one reconcile per new object); stripping it does", async () => {
    const namespace = await freshNamespace();
    const finalizer = 'example.com/widget';
    const calls: string[][] = [];
    const reconciler: Reconciler = {
      kind: 'Widget',
      resource: widgets,
      finalizer,
      async reconcile(_key, ctx) {
        const object: (KubeObject & { status?: { conditions?: Condition[] } }) | undefined = ctx.object;
        if (!object) return;
        const finalizers = object.metadata!.finalizers ?? [];
        calls.push(finalizers);
        if (!finalizers.includes(finalizer))
          await ctx.patch({
            metadata: { finalizers: [...finalizers, finalizer], resourceVersion: object.metadata!.resourceVersion },
          });
        await ctx.patchStatus({ observedGeneration: object.metadata!.generation });
      },
    };
    const manager = startManager({
      client: await client(),
      reconcilers: [reconciler],
      namespace,
      leaderElection: false,
      resyncMs: 0,
    });
    await manager.waitForSync(10_000);
    await admin.create(widgets, namespace, { metadata: { name: 'w', finalizers: ['example.com/other'] }, spec: {} });
    await eventually(async () => {
      const read = await admin.get<KubeObject & { status?: { observedGeneration?: number } }>(widgets, namespace, 'w');
      expect(read.status?.observedGeneration).toBe(1);
      expect(read.metadata?.finalizers).toEqual(['example.com/other', finalizer]);
    }, 5000);
    await sleep(500);
    expect(calls).toEqual([['example.com/other']]); // the finalizer patch's MODIFIED event did not requeue
    // Someone strips it: that change requeues, and the reconcile puts it back.
    await admin.patch(widgets, namespace, 'w', { metadata: { finalizers: ['example.com/other'] } });
    await eventually(async () => {
      expect(calls).toEqual([['example.com/other'], ['example.com/other']]);
      const read = await admin.get(widgets, namespace, 'w');
      expect(read.metadata?.finalizers).toEqual(['example.com/other', finalizer]);
    }, 5000);
    await manager.stop();
    await admin.patch(widgets, namespace, 'w', { metadata: { finalizers: null } });
  }, 30_000);

  test('events are created about an object, and repeats are folded into a count', async () => {
    const namespace = await freshNamespace();
    const object = await createConfigMap(namespace, 'subject');
    const events = new EventRecorder(admin, { component: 'tokenvault-test' });
    await events.record(object, 'Warning', 'TenantNotFound', 'tenant "t" does not exist');
    await events.record(object, 'Warning', 'TenantNotFound', 'tenant "t" does not exist');
    await events.record(object, 'Normal', 'Reconciled', 'ok');
    const list = await admin.list<
      KubeObject & {
        reason: string;
        count: number;
        involvedObject: { uid: string; kind: string };
        source: { component: string };
      }
    >(Resources.events, namespace);
    const byReason = Object.fromEntries(list.items.map((e) => [e.reason, e]));
    expect(list.items).toHaveLength(2);
    expect(byReason.TenantNotFound.count).toBe(2);
    expect(byReason.TenantNotFound.type).toBe('Warning');
    expect(byReason.TenantNotFound.involvedObject).toMatchObject({ kind: 'ConfigMap', uid: object.metadata!.uid });
    expect(byReason.TenantNotFound.source.component).toBe('tokenvault-test');
    expect(byReason.Reconciled.count).toBe(1);
    const { stdout } = await controlPlane.kubectl(['describe', 'configmap', 'subject', '-n', namespace]);
    expect(stdout).toMatch(/Warning\s+TenantNotFound.*tenant "t" does not exist/);
  });
});

// --- leader election ------------------------------------------------------------------------------------------------

describe('leader election', () => {
  const timings = { leaseDurationMs: 2000, renewDeadlineMs: 1500, retryPeriodMs: 500 };

  /** Samples which managers lead, every 20 ms, and records any moment when more than one did. */
  function watchLeaders(managers: Manager[]) {
    let overlaps = 0;
    const timer = setInterval(() => {
      if (managers.filter((m) => m.isLeader).length > 1) overlaps++;
    }, 20);
    cleanups.push(() => clearInterval(timer));
    return { overlaps: () => overlaps };
  }

  test('of two managers on one Lease exactly one leads and reconciles; when it stops, the other takes over quickly', async () => {
    const namespace = await freshNamespace();
    const lease = { namespace, name: 'tokenvault-controller', ...timings };
    const a = configMapReconciler('a');
    const b = configMapReconciler('b');
    const first = startManager({
      client: await client(),
      reconcilers: [a.reconciler],
      namespace,
      leaderElection: { ...lease, identity: 'first' },
    });
    const second = startManager({
      client: await client(),
      reconcilers: [b.reconciler],
      namespace,
      leaderElection: { ...lease, identity: 'second' },
    });
    const leaders = watchLeaders([first, second]);
    await Promise.all([first.waitForSync(10_000), second.waitForSync(10_000)]);
    await eventually(async () => expect([first.isLeader, second.isLeader].filter(Boolean)).toHaveLength(1), 5000);
    await sleep(1500); // a few renewals: still exactly one
    expect([first.isLeader, second.isLeader].filter(Boolean)).toHaveLength(1);
    const [leader, standby] = first.isLeader ? [first, second] : [second, first];
    const [leaderCalls, standbyCalls] = first.isLeader ? [a.calls, b.calls] : [b.calls, a.calls];

    await createConfigMap(namespace, 'one');
    await eventually(async () => expect(leaderCalls.map((c) => c.key)).toContain(`${namespace}/one`), 5000);
    expect(standbyCalls).toEqual([]);
    expect(standby.synced).toBe(true); // standbys keep their caches warm
    await eventually(async () => expect(standby.informer('ConfigMap')?.get(namespace, 'one')).toBeDefined(), 5000);
    expect(standbyCalls).toEqual([]);

    const held = await admin.get<KubeObject & { spec: { holderIdentity: string; leaseDurationSeconds: number } }>(
      Resources.leases,
      namespace,
      'tokenvault-controller',
    );
    expect(held.spec.holderIdentity).toBe(leader.identity);
    expect(held.spec.leaseDurationSeconds).toBe(2);

    // Graceful stop releases the Lease: the standby takes over at its next retry, well within the lease duration.
    const stoppedAt = Date.now();
    await leader.stop();
    const released = await admin.get<KubeObject & { spec: { holderIdentity: string } }>(
      Resources.leases,
      namespace,
      'tokenvault-controller',
    );
    expect(released.spec.holderIdentity).toBe('');
    await eventually(async () => expect(standby.isLeader).toBe(true), 3000);
    expect(Date.now() - stoppedAt).toBeLessThan(timings.leaseDurationMs);
    // The new leader reconciles everything, and what comes next.
    await eventually(async () => expect(standbyCalls.map((c) => c.key)).toContain(`${namespace}/one`), 5000);
    await createConfigMap(namespace, 'two');
    await eventually(async () => expect(standbyCalls.map((c) => c.key)).toContain(`${namespace}/two`), 5000);
    expect(leaders.overlaps()).toBe(0);
  }, 40_000);

  test('a leader cut off from the API stops leading before the other takes over', async () => {
    const namespace = await freshNamespace();
    const lease = { namespace, name: 'tokenvault-controller', ...timings };
    const relay = await TcpRelay.start(controlPlane.server);
    const first = startManager({
      client: await client({ via: relay }),
      reconcilers: [configMapReconciler('a').reconciler],
      namespace,
      leaderElection: { ...lease, identity: 'first' },
    });
    await eventually(async () => expect(first.isLeader).toBe(true), 5000);
    const second = startManager({
      client: await client(),
      reconcilers: [configMapReconciler('b').reconciler],
      namespace,
      leaderElection: { ...lease, identity: 'second' },
    });
    const leaders = watchLeaders([first, second]);
    await sleep(1000);
    expect(second.isLeader).toBe(false);

    const cutAt = Date.now();
    relay.refuse();
    await eventually(async () => expect(first.isLeader).toBe(false), 5000);
    const firstStoppedAfter = Date.now() - cutAt;
    await eventually(async () => expect(second.isLeader).toBe(true), 6000);
    const secondLeadsAfter = Date.now() - cutAt;
    expect(firstStoppedAfter).toBeLessThanOrEqual(timings.renewDeadlineMs + 300);
    expect(secondLeadsAfter).toBeGreaterThan(firstStoppedAfter);
    expect(secondLeadsAfter).toBeLessThan(timings.leaseDurationMs + 2 * timings.retryPeriodMs + 1000);
    expect(leaders.overlaps()).toBe(0);

    // Reconnected, the old leader stays a standby.
    relay.allow();
    await sleep(1500);
    expect(first.isLeader).toBe(false);
    expect(second.isLeader).toBe(true);
  }, 40_000);
});

// --- the controller process -------------------------------------------------------------------------------------

describe('tokenvault controller', () => {
  test('serves /healthz, /readyz (after sync) and /metrics, and reconciles', async () => {
    const namespace = await freshNamespace();
    await createConfigMap(namespace, 'existing');
    const config = loadConfig({
      requireStore: false,
      env: {
        TOKENVAULT_HOST: '127.0.0.1',
        TOKENVAULT_PORT: '0',
        TOKENVAULT_CONTROLLER_NAMESPACE: namespace,
        TOKENVAULT_LEASE_NAMESPACE: namespace,
        TOKENVAULT_RESYNC_SECONDS: '60',
      },
    });
    expect(config.controller).toEqual({
      namespace,
      leaderElection: true,
      leaseName: 'tokenvault-controller',
      leaseNamespace: namespace,
      resyncSeconds: 60,
      workers: 16,
      retryMaxSeconds: 60,
      workerImages: [],
    });
    const { reconciler, calls } = configMapReconciler('process');
    const controller: RunningController | undefined = await startController(config, logger, {
      reconcilers: [reconciler],
      kubeConfig: controlPlane.kubeConfig(),
      identity: 'process-test',
      leaseDurationMs: 2000,
      renewDeadlineMs: 1500,
      retryPeriodMs: 500,
    });
    cleanups.push(() => controller.close());
    expect((await fetch(`${controller.url}/healthz`)).status).toBe(200);
    await eventually(async () => expect((await fetch(`${controller.url}/readyz`)).status).toBe(200), 10_000);
    await eventually(async () => expect(calls.map((c) => c.key)).toContain(`${namespace}/existing`), 5000);
    await eventually(async () => {
      const text = await (await fetch(`${controller.url}/metrics`)).text();
      expect(text).toMatch(/tokenvault_controller_leader 1/);
      expect(text).toMatch(/tokenvault_controller_reconciles_total\{kind="ConfigMap",result="success"\} [1-9]/);
      expect(text).toMatch(
        /tokenvault_controller_reconcile_duration_seconds_bucket\{le="[^"]+",kind="ConfigMap",result="success"\}/,
      );
      expect(text).toMatch(/tokenvault_controller_queue_depth\{kind="ConfigMap"\} 0/);
      expect(text).toMatch(/tokenvault_process_cpu_seconds_total/);
    }, 5000);
    expect((await fetch(`${controller.url}/nope`)).status).toBe(404);
    const lease = await admin.get<KubeObject & { spec: { holderIdentity: string } }>(
      Resources.leases,
      namespace,
      'tokenvault-controller',
    );
    expect(lease.spec.holderIdentity).toBe('process-test');

    await controller.close();
    const released = await admin.get<KubeObject & { spec: { holderIdentity: string } }>(
      Resources.leases,
      namespace,
      'tokenvault-controller',
    );
    expect(released.spec.holderIdentity).toBe('');
  }, 30_000);
});

describe('tokenvault controller (the built CLI)', () => {
  const cli = 'dist/cli.js';

  beforeAll(() => {
    if (!existsSync(cli)) throw new Error('dist/ is not built: run npx tsc -p tsconfig.build.json');
  });

  test('refuses to start without the API URL and the operator key, naming the settings', async () => {
    const result = await new Promise<{ code: number | null; stderr: string }>((resolve) => {
      execFile(
        process.execPath,
        ['--no-node-snapshot', cli, 'controller'],
        { env: { PATH: process.env.PATH ?? '' } },
        (error, _stdout, stderr) => resolve({ code: error ? ((error as { code?: number }).code ?? 1) : 0, stderr }),
      );
    });
    expect(result.code).toBe(1);
    expect(result.stderr).toContain('TOKENVAULT_API_URL: required');
    expect(result.stderr).toContain('TOKENVAULT_OPERATOR_KEY_FILE: required');
  });

  test('starts with a kubeconfig, leads, serves /readyz, and releases the Lease on SIGTERM', async () => {
    const namespace = await freshNamespace();
    const port = await freeLoopbackPort();
    const child = spawn(process.execPath, ['--no-node-snapshot', cli, 'controller'], {
      env: {
        PATH: process.env.PATH ?? '',
        KUBECONFIG: controlPlane.kubeconfigPath,
        POD_NAME: 'cli-test',
        TOKENVAULT_HOST: '127.0.0.1',
        TOKENVAULT_PORT: String(port),
        TOKENVAULT_API_URL: 'http://127.0.0.1:9',
        TOKENVAULT_OPERATOR_KEY: 'operator-key-for-the-controller-test-0123456789',
        TOKENVAULT_CONTROLLER_NAMESPACE: namespace,
        TOKENVAULT_LEASE_NAMESPACE: namespace,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout.on('data', (chunk) => (output += chunk));
    child.stderr.on('data', (chunk) => (output += chunk));
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    cleanups.push(() => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    });

    await eventually(async () => expect((await fetch(`http://127.0.0.1:${port}/readyz`)).status).toBe(200), 15_000);
    await eventually(async () => {
      const lease = await admin.get<KubeObject & { spec: { holderIdentity: string } }>(
        Resources.leases,
        namespace,
        'tokenvault-controller',
      );
      expect(lease.spec.holderIdentity).toBe(`cli-test_${child.pid}`);
    }, 5000);
    expect(output).not.toContain('operator-key-for-the-controller-test');

    child.kill('SIGTERM');
    expect(await exited).toBe(0);
    const lease = await admin.get<KubeObject & { spec: { holderIdentity: string } }>(
      Resources.leases,
      namespace,
      'tokenvault-controller',
    );
    expect(lease.spec.holderIdentity).toBe('');
    expect(output).toContain('lease released');
  }, 30_000);
});
