// The controller at scale: 10,000 Reactor objects applied at once with server-side apply, the time until every one is
// Ready, the controller process's peak memory, and what a periodic resync of the unchanged objects writes.
//
// Processes: a Kubernetes control plane (kube-apiserver + its etcd, crds/ installed: test/support/control-plane.ts),
// a second etcd for the vault, the built API and one worker (`dist/cli.js api` / `worker`), and the built controller
// (`dist/cli.js controller`, KUBECONFIG pointing at the control plane, leader election on, default workers), each its
// own child process, as deployed.
// Setup (not measured): one Tenant, one Application and one ReactorFormula, applied and Ready first.
// Measured: from the first server-side apply (PATCH application/apply-patch+yaml straight to the API, field manager
// `bench`, BENCH_CONTROLLER_APPLY_CONCURRENCY requests in flight) until a watch of the Reactors (an informer started
// before the applies) has seen every one Ready for its generation: the time of the watch event of the last one.
// Progress is printed every 2 s. Peak memory is the controller's VmHWM (/proc/<pid>/status) at the end; its RSS is
// also sampled every 2 s. The CPU each process spent until all Ready is reported per Reactor: kube-apiserver's (from
// its metrics), the controller's, the vault API's, its etcd's, the worker's and this process's (the applies and the
// watch), since on a shared machine they compete for the same cores.
// Then the resync: with every object Ready and unchanged, the writes counted by kube-apiserver
// (apiserver_request_total, by verb and resource; the Lease renewals of leader election are shown apart) and by the
// vault API (tokenvault_http_requests_total, by method) are read before and after the controller's next periodic
// resync has reconciled every Reactor again (tokenvault_controller_reconciles_total, queue idle). A resync of
// unchanged objects should write nothing.
// Gives up after 15 minutes (Ready) and resync + 5 minutes (resync).
// Settings: BENCH_CONTROLLER_OBJECTS (default 10000; BENCH_SCALE_REACTORS is the older name),
// BENCH_CONTROLLER_APPLY_CONCURRENCY (16), BENCH_CONTROLLER_RESYNC_SECONDS (60; TOKENVAULT_RESYNC_SECONDS, at least
// 10), BENCH_SCALE_WORKERS (TOKENVAULT_CONTROLLER_WORKERS, default the CLI's), BENCH_CONTROLLER_FINALIZER_POLICY
// (default 1: the finalizer MutatingAdmissionPolicy of config/finalizer-policy/finalizer_policy.yaml is installed, as
// the chart does, so kube-apiserver adds the controller's finalizer at create; 0: left out, the controller PATCHes it
// in), BENCH_CONTROLLER_APPLY_FIRST (default 0; 1: the controller process is stopped with SIGSTOP during the applies
// and continued after them, and the report splits the CPU per Reactor into the applies alone and the controller's
// catching up: what a user's apply costs kube-apiserver, apart from what reconciling it costs everyone).
import { execFileSync, spawn } from 'node:child_process';
import path from 'node:path';
import { readFileSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { performance } from 'node:perf_hooks';
import { KubeClient, Resources, type KubeObject } from '../src/controller/kube.js';
import { Informer } from '../src/controller/informer.js';
import { Kinds } from '../src/controller/reconcilers/common.js';
import { applyFinalizerPolicy } from '../test/support/finalizer-policy.js';
import { startControlPlane, type ControlPlane } from '../test/support/control-plane.js';
import { freeLoopbackPort } from '../test/support/ports.js';
import { repoRoot } from '../test/support/repo-root.js';
import {
  spawnApi,
  spawnWorker,
  startBenchEtcd,
  type BenchApi,
  type BenchEtcd,
  type BenchWorker,
} from './support/processes.js';
import { callsPer, etcdCalls } from './support/etcd-calls.js';
import { processCpuSeconds } from './support/load.js';
import { heading, table } from './support/report.js';
import type { Benchmark } from './support/settings.js';

const POLL_MS = 2_000;
const GIVE_UP_MS = 15 * 60_000;

export const controllerScaleBenchmark: Benchmark = {
  name: 'controller-scale',
  description: '10,000 Reactors (server-side apply): time until all Ready, controller peak RSS, writes of a resync',
  run,
};

interface StatusObject extends KubeObject {
  status?: { observedGeneration?: number; conditions?: Array<{ type: string; status: string; reason?: string }> };
}

const readyOf = (o: StatusObject) => o.status?.conditions?.find((c) => c.type === 'Ready');
const isReady = (o: StatusObject) =>
  readyOf(o)?.status === 'True' && o.status?.observedGeneration === o.metadata?.generation;

/** A line of /proc/<pid>/status in MiB (VmRSS, VmHWM), or undefined. */
function procMiB(pid: number, field: 'VmRSS' | 'VmHWM'): number | undefined {
  try {
    const match = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return match ? Number(match[1]) / 1024 : undefined;
  } catch {
    return undefined;
  }
}

async function run(): Promise<void> {
  const progress = (line: string) => process.stderr.write(`controller-scale: ${line}\n`);
  const total = Number(process.env.BENCH_CONTROLLER_OBJECTS ?? process.env.BENCH_SCALE_REACTORS ?? 10_000);
  const applyConcurrency = Number(process.env.BENCH_CONTROLLER_APPLY_CONCURRENCY ?? 16);
  const resyncSeconds = Math.max(10, Number(process.env.BENCH_CONTROLLER_RESYNC_SECONDS ?? 60));
  const finalizerPolicy = process.env.BENCH_CONTROLLER_FINALIZER_POLICY !== '0';
  const applyFirst = process.env.BENCH_CONTROLLER_APPLY_FIRST === '1';
  let plane: ControlPlane | undefined;
  let etcd: BenchEtcd | undefined;
  let worker: BenchWorker | undefined;
  let api: BenchApi | undefined;
  let client: KubeClient | undefined;
  let watched: Informer<StatusObject> | undefined;

  let stopController = async () => {};
  try {
    progress('starting the control plane, etcd, the worker and the API');
    // Compiled into dist-bench/, control-plane.ts would look for crds/ and hack/tools.sh beside itself: name them here.
    for (const [variable, tool] of [
      ['TOKENVAULT_KUBE_APISERVER_BIN', 'kube-apiserver'],
      ['TOKENVAULT_KUBECTL_BIN', 'kubectl'],
    ] as const) {
      process.env[variable] ||= execFileSync(path.join(repoRoot, 'hack/tools.sh'), [tool], {
        cwd: repoRoot,
        encoding: 'utf8',
        stdio: ['ignore', 'pipe', 'inherit'],
      }).trim();
    }
    [plane, etcd] = await Promise.all([startControlPlane({ crdsDir: path.join(repoRoot, 'crds') }), startBenchEtcd()]);
    const [apiPort, apiMetricsPort, controllerPort] = [
      await freeLoopbackPort(),
      await freeLoopbackPort(),
      await freeLoopbackPort(),
    ];
    worker = await spawnWorker({ apiUrl: `http://127.0.0.1:${apiPort}`, logLevel: 'warn' });
    api = await spawnApi({
      storeUrl: etcd.storeUrl,
      logLevel: 'warn',
      port: apiPort,
      cpuProfileDir: process.env.BENCH_CONTROLLER_PROFILE && path.resolve(process.env.BENCH_CONTROLLER_PROFILE),
      env: {
        TOKENVAULT_WORKER_URL: worker.url,
        TOKENVAULT_METRICS_PORT: String(apiMetricsPort),
        // Every Reactor is in the one tenant: past the default 1,000 reactors per tenant.
        TOKENVAULT_REACTORS_PER_TENANT: String(total),
      },
    });
    client = await KubeClient.fromKubeConfig(plane.kubeConfig());

    progress('starting the controller');
    // BENCH_CONTROLLER_PROFILE=<dir>: the controller (and the vault API) write V8 CPU profiles there when they exit
    // (Chrome DevTools).
    const profileArgs = process.env.BENCH_CONTROLLER_PROFILE
      ? ['--cpu-prof', '--cpu-prof-dir', path.resolve(process.env.BENCH_CONTROLLER_PROFILE)]
      : [];
    const child = spawn(process.execPath, ['--no-node-snapshot', ...profileArgs, 'dist/cli.js', 'controller'], {
      cwd: repoRoot,
      env: {
        PATH: process.env.PATH ?? '',
        KUBECONFIG: plane.kubeconfigPath,
        TOKENVAULT_HOST: '127.0.0.1',
        TOKENVAULT_PORT: String(controllerPort),
        TOKENVAULT_RESYNC_SECONDS: String(resyncSeconds),
        TOKENVAULT_LOG_LEVEL: 'info',
        TOKENVAULT_API_URL: api.url,
        TOKENVAULT_OPERATOR_KEY: api.operatorKey,
        TOKENVAULT_LEASE_NAMESPACE: 'default',
        ...(process.env.BENCH_SCALE_WORKERS ? { TOKENVAULT_CONTROLLER_WORKERS: process.env.BENCH_SCALE_WORKERS } : {}),
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });

    let tail = '';
    const keep = (chunk: Buffer | string) => {
      tail = (tail + chunk.toString()).slice(-8_000);
    };
    child.stderr.on('data', keep);
    let errorLines = 0;
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    const killOnExit = () => child.kill('SIGKILL');
    process.once('exit', killOnExit);
    stopController = async () => {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill('SIGCONT'); // stopped for the applies (BENCH_CONTROLLER_APPLY_FIRST) if they failed
        child.kill('SIGTERM');
        const timer = setTimeout(() => child.kill('SIGKILL'), 15_000);
        await exited;
        clearTimeout(timer);
      }
      process.removeListener('exit', killOnExit);
    };
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`the controller did not start within 60 s:\n${tail}`)), 60_000);
      void exited.then(() => reject(new Error(`the controller exited:\n${tail}`)));
      createInterface({ input: child.stdout }).on('line', (line) => {
        keep(`${line}\n`);
        if (line.includes('"level":50') || line.includes('"level":"error"')) errorLines++;
        if (line.includes('"msg":"controller started"')) {
          clearTimeout(timer);
          resolve();
        }
      });
    });

    const ns = 'scale';
    await plane.kubectl(['create', 'namespace', ns]);
    if (finalizerPolicy) {
      const kube = plane;
      await applyFinalizerPolicy((args, input) => kube.kubectl(args, { input }), ns);
    }
    await plane.kubectl(['apply', '-f', '-'], {
      input: `
apiVersion: tokenvault.dev/v1alpha1
kind: Tenant
metadata: {name: acme, namespace: ${ns}}
spec:
  managementKeySecretRef: {name: acme-management}
---
apiVersion: tokenvault.dev/v1alpha1
kind: Application
metadata: {name: app, namespace: ${ns}}
spec:
  tenantRef: {name: acme}
  type: private
  permissions: [token:use, token:create]
  keySecretRef: {name: app-key}
---
apiVersion: tokenvault.dev/v1alpha1
kind: ReactorFormula
metadata: {name: echo, namespace: ${ns}}
spec:
  tenantRef: {name: acme}
  code: ${JSON.stringify('module.exports = async (req) => ({ raw: { index: req.configuration.index } });')}
  configuration:
    - {name: index, type: number}
`,
    });
    const setupDeadline = Date.now() + 120_000;
    for (const [kind, name] of [
      ['Tenant', 'acme'],
      ['Application', 'app'],
      ['ReactorFormula', 'echo'],
    ] as const) {
      for (;;) {
        const object = await client.find<StatusObject>(Kinds[kind], ns, name);
        if (object && isReady(object)) break;
        if (Date.now() > setupDeadline)
          throw new Error(`${kind} ${name} did not become Ready: ${JSON.stringify(object?.status)}\n${tail}`);
        await new Promise((resolve) => setTimeout(resolve, 250));
      }
    }
    const rssBefore = procMiB(child.pid!, 'VmRSS');
    progress(
      `setup Ready; controller RSS ${rssBefore?.toFixed(0)} MiB; applying ${total} Reactors (server-side apply, ${applyConcurrency} in flight)`,
    );

    const reactor = (i: number) => ({
      apiVersion: 'tokenvault.dev/v1alpha1',
      kind: 'Reactor',
      metadata: { name: `r-${String(i).padStart(5, '0')}`, namespace: ns },
      spec: {
        tenantRef: { name: 'acme' },
        formulaRef: { name: 'echo' },
        applicationRef: { name: 'app' },
        configuration: { index: { value: String(i) } },
      },
    });
    const controllerMetricsUrl = `http://127.0.0.1:${controllerPort}/metrics`;
    const kubeMetricsText = async () => (await plane!.kubectl(['get', '--raw', '/metrics'])).stdout;
    const metricsText = async (url: string) => (await fetch(url)).text();
    const [kubeAtStart, controllerAtStart] = await Promise.all([kubeMetricsText(), metricsText(controllerMetricsUrl)]);
    // The other processes on the machine share its CPUs with kube-apiserver: what each spent per Reactor says where
    // the machine's time went. kube-apiserver's own CPU comes from its metrics; the control plane's etcd is left out.
    const otherCpu = () => ({
      controller: processCpuSeconds(child.pid!) ?? NaN,
      'vault API': processCpuSeconds(api!.pid) ?? NaN,
      'vault etcd': etcd?.pid === undefined ? NaN : (processCpuSeconds(etcd.pid) ?? NaN),
      worker: processCpuSeconds(worker!.pid) ?? NaN,
      benchmark: ((usage) => (usage.user + usage.system) / 1e6)(process.cpuUsage()),
    });
    const cpuAtStart = otherCpu();
    type CpuReading = { kube: number; others: ReturnType<typeof otherCpu> };
    /** Every process's CPU seconds now, kube-apiserver's from a reading of its metrics. */
    const cpuReading = (kubeMetrics: string): CpuReading => ({
      kube: sumSamples(kubeMetrics, 'process_cpu_seconds_total'),
      others: otherCpu(),
    });
    const vaultEtcdAtStart = await etcdCalls(etcd.endpoint);
    // Readiness is followed with a watch (an informer), not by listing all the Reactors at each poll: a list of
    // 10,000 objects costs kube-apiserver and this process CPU the controller is competing for, and a poll only every
    // 2 s made the time up to 2 s late. The moments the first, the half and the last Reactor turn Ready are taken
    // from their watch events (the polls below begin only once the applies are done, which can be after all three).
    watched = new Informer<StatusObject>(client, Kinds.Reactor, { namespace: ns });
    const readyNames = new Set<string>();
    let firstReadyAt: number | undefined;
    let halfReadyAt: number | undefined;
    let allReadyAt: number | undefined;
    let reachedAllReady = () => {};
    const allReady = new Promise<void>((resolve) => (reachedAllReady = resolve));
    const follow = (object: StatusObject) => {
      const name = object.metadata?.name ?? '';
      if (isReady(object)) readyNames.add(name);
      else readyNames.delete(name);
      const now = performance.now();
      if (readyNames.size > 0) firstReadyAt ??= now;
      if (readyNames.size >= total / 2) halfReadyAt ??= now;
      if (readyNames.size >= total && allReadyAt === undefined) {
        allReadyAt = now;
        reachedAllReady();
      }
    };
    watched.addHandlers({ onAdd: follow, onUpdate: (_, object) => follow(object) });
    watched.start();
    await watched.waitForSync(60_000);
    const nextPoll = () => Promise.race([allReady, new Promise<void>((resolve) => setTimeout(resolve, POLL_MS))]);
    let allReadyOrPoll = nextPoll();
    if (applyFirst) child.kill('SIGSTOP');
    const started = performance.now();
    const applyMs: number[] = [];
    let next = 0;
    await Promise.all(
      Array.from({ length: applyConcurrency }, async () => {
        for (let i = next++; i < total; i = next++) {
          const t = performance.now();
          const object = reactor(i);
          await client!.patch(Kinds.Reactor, ns, object.metadata.name, object, {
            type: 'apply',
            fieldManager: 'bench',
            force: true,
          });
          applyMs.push(performance.now() - t);
        }
      }),
    );
    const appliedMs = performance.now() - started;
    // With the controller stopped during the applies, the CPU they alone cost (kube-apiserver's includes its admission
    // of the finalizer policy and the watch events to this process).
    let cpuAtApplied: CpuReading | undefined;
    if (applyFirst) {
      cpuAtApplied = cpuReading(await kubeMetricsText());
      child.kill('SIGCONT');
    }
    progress(`applied in ${(appliedMs / 1000).toFixed(1)} s; waiting for Ready`);

    let peakRss = rssBefore ?? 0;
    let ready = 0;
    let allReadyMs: number | undefined;
    const reasons = new Map<string, number>();
    while (performance.now() - started < GIVE_UP_MS) {
      const items = watched.list(ns);
      const elapsed = performance.now() - started;
      ready = items.filter(isReady).length;
      reasons.clear();
      for (const item of items) {
        if (isReady(item)) continue;
        const reason = readyOf(item)?.reason ?? '(no status)';
        reasons.set(reason, (reasons.get(reason) ?? 0) + 1);
      }
      const rss = procMiB(child.pid!, 'VmRSS');
      const queue = await metricsText(controllerMetricsUrl).catch(() => '');
      const queueNote = `queue ${sumSamples(queue, 'tokenvault_controller_queue_depth')} waiting, ${sumSamples(queue, 'tokenvault_controller_queue_in_flight')} in flight, ${sumSamples(queue, 'tokenvault_controller_reconciles_total', (l) => l.kind === 'Reactor')} reconciled, ${sumSamples(queue, 'tokenvault_controller_informer_objects', (l) => l.resource.startsWith('reactors'))} cached`;
      if (rss !== undefined) peakRss = Math.max(peakRss, rss);
      progress(
        `${(elapsed / 1000).toFixed(0)} s: ${ready}/${total} Ready (${items.length} watched), RSS ${rss?.toFixed(0)} MiB, ${queueNote}${reasons.size ? `, not ready: ${JSON.stringify(Object.fromEntries(reasons))}` : ''}`,
      );
      if (ready >= total) {
        allReadyMs = (allReadyAt ?? performance.now()) - started;
        break;
      }
      if (child.exitCode !== null || child.signalCode !== null) throw new Error(`the controller exited:\n${tail}`);
      await allReadyOrPoll;
      allReadyOrPoll = nextPoll();
    }
    const hwm = procMiB(child.pid!, 'VmHWM');
    // What the first pass cost: reconciles per Reactor and the kube-apiserver writes (the benchmark's applies among
    // them, as APPLY reactors), read once every Reactor is Ready.
    const [kubeAtReady, controllerAtReady] = await Promise.all([kubeMetricsText(), metricsText(controllerMetricsUrl)]);
    // CPU seconds spent until all Ready: on a shared machine these vary less than the wall time.
    const atReady = cpuReading(kubeAtReady);
    const vaultEtcdAtReady = await etcdCalls(etcd.endpoint);
    // CPU seconds per process between two readings, and a report row of them per Reactor.
    const cpuBetween = (from: CpuReading, to: CpuReading) => [
      { name: 'kube-apiserver', seconds: to.kube - from.kube },
      ...Object.entries(to.others).map(([name, seconds]) => ({
        name,
        seconds: seconds - from.others[name as keyof typeof from.others],
      })),
    ];
    const perReactorRow = (label: string, cpu: Array<{ name: string; seconds: number }>) => [
      `${label}, ms per Reactor: ${cpu.map((c) => c.name).join(' / ')}`,
      cpu.map((c) => ((1000 * c.seconds) / total).toFixed(2)).join(' / '),
    ];
    const atStart: CpuReading = { kube: sumSamples(kubeAtStart, 'process_cpu_seconds_total'), others: cpuAtStart };
    const splitRows = cpuAtApplied
      ? [
          perReactorRow('CPU of the applies alone (controller stopped)', cpuBetween(atStart, cpuAtApplied)),
          [
            'after the applies, until all Ready (the controller catching up)',
            allReadyMs === undefined ? '-' : `${((allReadyMs - appliedMs) / 1000).toFixed(1)} s`,
          ],
          perReactorRow('CPU after the applies until all Ready', cpuBetween(cpuAtApplied, atReady)),
        ]
      : [];
    const firstPassReconciles =
      sumSamples(controllerAtReady, 'tokenvault_controller_reconciles_total', (l) => l.kind === 'Reactor') -
      sumSamples(controllerAtStart, 'tokenvault_controller_reconciles_total', (l) => l.kind === 'Reactor');
    const durationOf = (body: string, part: 'sum' | 'count') =>
      sumSamples(body, `tokenvault_controller_reconcile_duration_seconds_${part}`, (l) => l.kind === 'Reactor');
    const reconcileMeanMs =
      (1000 * (durationOf(controllerAtReady, 'sum') - durationOf(controllerAtStart, 'sum'))) /
      Math.max(1, durationOf(controllerAtReady, 'count') - durationOf(controllerAtStart, 'count'));
    const writesOf = (body: string) =>
      countBy(
        body,
        'apiserver_request_total',
        (l) => `${l.verb} ${l.resource}${l.subresource ? `/${l.subresource}` : ''}`,
        (l) =>
          ['POST', 'PUT', 'PATCH', 'DELETE', 'APPLY', 'CREATE', 'UPDATE'].includes(l.verb ?? '') &&
          l.resource !== 'leases',
      );
    const firstPassWrites = difference(writesOf(kubeAtReady), writesOf(kubeAtStart));

    // Every Reactor is one vault reactor (ids = uids), none extra: counted with the tenant's management key.
    const secret = await client.find<KubeObject & { data?: Record<string, string> }>(
      Resources.secrets,
      ns,
      'acme-management',
    );
    const managementKey = Buffer.from(secret?.data?.key ?? '', 'base64').toString('utf8');
    const listed = await fetch(`${api.url}/reactors?size=1`, { headers: { 'bt-api-key': managementKey } });
    const vaultCount = listed.ok
      ? ((await listed.json()) as { pagination?: { total_items?: number } }).pagination?.total_items
      : undefined;

    // The resync: counters before and after the next periodic resync has reconciled every Reactor again.
    let resync:
      | {
          reconciles: number;
          windowMs: number;
          kubeWrites: Map<string, number>;
          leaseWrites: Map<string, number>;
          vaultWrites: Map<string, number>;
          vaultReads: number;
          errorLines: number;
        }
      | undefined;
    if (allReadyMs !== undefined) {
      const controllerMetrics = `http://127.0.0.1:${controllerPort}/metrics`;
      const apiMetrics = `http://127.0.0.1:${apiMetricsPort}/metrics`;
      const kubeMetrics = async () => (await plane!.kubectl(['get', '--raw', '/metrics'])).stdout;
      const text = async (url: string) => (await fetch(url)).text();
      const reactorReconciles = (body: string) =>
        sumSamples(body, 'tokenvault_controller_reconciles_total', (labels) => labels.kind === 'Reactor');
      const idle = (body: string) =>
        sumSamples(body, 'tokenvault_controller_queue_depth') +
          sumSamples(body, 'tokenvault_controller_queue_in_flight') +
          sumSamples(body, 'tokenvault_controller_events_backlog') ===
        0;
      // Let the tail of the first pass settle (status writes, and the Events, written in the background at a bounded
      // rate) before the counters are read.
      for (let i = 0; i < 120 && !idle(await text(controllerMetrics)); i++)
        await new Promise((resolve) => setTimeout(resolve, 1_000));
      const [kubeBefore, vaultBefore, controllerBefore] = await Promise.all([
        kubeMetrics(),
        text(apiMetrics),
        text(controllerMetrics),
      ]);
      const errorsBefore = errorLines;
      const from = reactorReconciles(controllerBefore);
      const windowStart = performance.now();
      progress(`all Ready; waiting for a resync (every ${resyncSeconds} s) to reconcile ${total} Reactors again`);
      const resyncDeadline = Date.now() + resyncSeconds * 1000 + 5 * 60_000;
      for (;;) {
        const body = await text(controllerMetrics);
        const done = reactorReconciles(body) - from;
        if (done >= total && idle(body)) break;
        if (Date.now() > resyncDeadline) {
          progress(`resync: only ${done} of ${total} Reactors reconciled again before the deadline`);
          break;
        }
        await new Promise((resolve) => setTimeout(resolve, 1_000));
      }
      const [kubeAfter, vaultAfter, controllerAfter] = await Promise.all([
        kubeMetrics(),
        text(apiMetrics),
        text(controllerMetrics),
      ]);
      const isWrite = (verb: string) => ['POST', 'PUT', 'PATCH', 'DELETE', 'CREATE', 'UPDATE', 'APPLY'].includes(verb);
      const kubeByVerb = (body: string, leases: boolean) =>
        countBy(
          body,
          'apiserver_request_total',
          (l) => `${l.verb} ${l.resource}${l.subresource ? `/${l.subresource}` : ''}`,
          (l) => isWrite(l.verb ?? '') && (l.resource === 'leases') === leases,
        );
      const vaultByMethod = (body: string, writes: boolean) =>
        countBy(
          body,
          'tokenvault_http_requests_total',
          (l) => `${l.method} ${l.route}`,
          (l) => isWrite(l.method ?? '') === writes,
        );
      resync = {
        reconciles: reactorReconciles(controllerAfter) - from,
        windowMs: performance.now() - windowStart,
        kubeWrites: difference(kubeByVerb(kubeAfter, false), kubeByVerb(kubeBefore, false)),
        leaseWrites: difference(kubeByVerb(kubeAfter, true), kubeByVerb(kubeBefore, true)),
        vaultWrites: difference(vaultByMethod(vaultAfter, true), vaultByMethod(vaultBefore, true)),
        vaultReads: [
          ...difference(vaultByMethod(vaultAfter, false), vaultByMethod(vaultBefore, false)).values(),
        ].reduce((a, b) => a + b, 0),
        errorLines: errorLines - errorsBefore,
      };
    }

    const seconds = (ms: number | undefined) => (ms === undefined ? '-' : `${(ms / 1000).toFixed(1)} s`);
    const sinceStart = (at: number | undefined) => (at === undefined ? undefined : at - started);
    process.stdout.write(
      [
        heading(`controller scale: ${total} Reactor objects applied at once`),
        table(
          ['measure', 'value'],
          [
            [`server-side apply of ${total} (${applyConcurrency} in flight)`, seconds(appliedMs)],
            [
              'apply request p50 / max',
              `${percentile(applyMs, 0.5).toFixed(1)} / ${Math.max(...applyMs).toFixed(0)} ms`,
            ],
            ['first Ready (watch event, from the first apply)', seconds(sinceStart(firstReadyAt))],
            [`half Ready (${Math.ceil(total / 2)})`, seconds(sinceStart(halfReadyAt))],
            [
              `all ${total} Ready`,
              allReadyMs === undefined
                ? `not reached in ${GIVE_UP_MS / 60_000} min (${ready} Ready)`
                : seconds(allReadyMs),
            ],
            ['throughput', allReadyMs === undefined ? '-' : `${(total / (allReadyMs / 1000)).toFixed(1)} objects/s`],
            ['controller RSS before the Reactors', `${rssBefore?.toFixed(0) ?? '?'} MiB`],
            ['controller RSS peak (sampled every 2 s)', `${peakRss.toFixed(0)} MiB`],
            ['controller peak RSS (VmHWM)', `${hwm?.toFixed(0) ?? '?'} MiB`],
            ['vault reactors in the tenant (GET /reactors)', String(vaultCount ?? '?')],
            ['Reactor reconciles until all Ready', String(firstPassReconciles)],
            ['Reactor reconcile mean duration until all Ready', `${reconcileMeanMs.toFixed(1)} ms`],
            ['kube-apiserver writes until all Ready (leases apart)', describe(firstPassWrites)],
            perReactorRow('CPU until all Ready', cpuBetween(atStart, atReady)),
            ...splitRows,
            ['vault etcd calls until all Ready, per Reactor', callsPer(vaultEtcdAtStart, vaultEtcdAtReady, total)],
            ['controller error log lines', String(errorLines)],
          ],
          ['l', 'r'],
        ),
        resync === undefined
          ? 'resync: not measured (not every Reactor became Ready)'
          : [
              heading(`resync of ${total} unchanged objects (TOKENVAULT_RESYNC_SECONDS=${resyncSeconds})`),
              table(
                ['measure', 'value'],
                [
                  ['Reactor reconciles in the window', String(resync.reconciles)],
                  ['window (until every Reactor was reconciled again, queue idle)', seconds(resync.windowMs)],
                  ['kube-apiserver writes (POST/PUT/PATCH/DELETE), leases apart', describe(resync.kubeWrites)],
                  ['kube-apiserver Lease writes (leader election, apiserver identity)', describe(resync.leaseWrites)],
                  ['vault API writes (POST/PUT/PATCH/DELETE)', describe(resync.vaultWrites)],
                  ['vault API reads (GET)', String(resync.vaultReads)],
                  ['controller error log lines during the resync', String(resync.errorLines)],
                ],
                ['l', 'r'],
              ),
            ].join('\n'),
        `controller: ${process.env.BENCH_SCALE_WORKERS ?? 'default'} workers, leader election on; Ready followed by a watch${finalizerPolicy ? '; the finalizer added by the MutatingAdmissionPolicy' : '; no finalizer policy (the controller PATCHes it in)'}${applyFirst ? '; stopped (SIGSTOP) during the applies, continued after them (BENCH_CONTROLLER_APPLY_FIRST=1)' : ''}.`,
        '',
      ].join('\n'),
    );
  } finally {
    progress('stopping');
    await watched?.stop().catch(() => undefined);
    await stopController().catch(() => undefined);
    client?.close();
    await api?.stop().catch(() => undefined);
    await worker?.stop().catch(() => undefined);
    await etcd?.stop().catch(() => undefined);
    await plane?.stop().catch(() => undefined);
  }
}

type Labels = Record<string, string>;

/** The samples of a counter or gauge in Prometheus text format, with their labels. */
function samples(body: string, name: string): Array<{ labels: Labels; value: number }> {
  const out: Array<{ labels: Labels; value: number }> = [];
  for (const line of body.split('\n')) {
    if (!line.startsWith(name) || (line[name.length] !== '{' && line[name.length] !== ' ')) continue;
    const labels: Labels = {};
    const open = line.indexOf('{');
    const close = line.lastIndexOf('}');
    if (open === name.length && close > open) {
      for (const match of line.slice(open + 1, close).matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g))
        labels[match[1]] = match[2]!;
    }
    out.push({
      labels,
      value: Number(
        line
          .slice((close > 0 ? close : name.length) + 1)
          .trim()
          .split(' ')[0],
      ),
    });
  }
  return out;
}

function sumSamples(body: string, name: string, filter: (labels: Labels) => boolean = () => true): number {
  return samples(body, name)
    .filter((s) => filter(s.labels))
    .reduce((sum, s) => sum + s.value, 0);
}

function countBy(
  body: string,
  name: string,
  key: (labels: Labels) => string,
  filter: (labels: Labels) => boolean,
): Map<string, number> {
  const out = new Map<string, number>();
  for (const s of samples(body, name)) {
    if (!filter(s.labels)) continue;
    out.set(key(s.labels), (out.get(key(s.labels)) ?? 0) + s.value);
  }
  return out;
}

function difference(after: Map<string, number>, before: Map<string, number>): Map<string, number> {
  const out = new Map<string, number>();
  for (const [key, value] of after) {
    const delta = value - (before.get(key) ?? 0);
    if (delta > 0) out.set(key, delta);
  }
  return out;
}

/** "0", or the total and its parts: "3 (PATCH reactors/status: 3)". */
function describe(counts: Map<string, number>): string {
  const total = [...counts.values()].reduce((a, b) => a + b, 0);
  if (total === 0) return '0';
  return `${total} (${[...counts].map(([key, value]) => `${key}: ${value}`).join(', ')})`;
}

function percentile(values: number[], p: number): number {
  if (values.length === 0) return 0;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))];
}
