// The controller at scale: 1,000 Reactor objects applied at once, the time until every one is Ready, and the
// controller process's peak memory.
//
// Processes: a Kubernetes control plane (kube-apiserver + its etcd, crds/ installed: test/support/control-plane.ts),
// a second etcd for the vault, the built API and one worker (`dist/cli.js api` / `worker`), and the built controller
// (`dist/cli.js controller`, KUBECONFIG pointing at the control plane, leader election on, default workers), each its
// own child process, as deployed.
// Setup (not measured): one Tenant, one Application and one ReactorFormula, applied and Ready first.
// Measured: from the first of five `kubectl apply -f -` calls (200 Reactors each) until a list of the Reactors shows
// all 1,000 Ready for their generation (polled every 2 s, so the time is accurate to about 2 s). Peak memory is the
// controller's VmHWM (/proc/<pid>/status) at the end; its RSS is also sampled at each poll. Gives up after 15 minutes.
// Settings: BENCH_SCALE_REACTORS (default 1000), BENCH_SCALE_WORKERS (TOKENVAULT_CONTROLLER_WORKERS, default the CLI's).
import { execFileSync, spawn } from 'node:child_process';
import path from 'node:path';
import { readFileSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { performance } from 'node:perf_hooks';
import { KubeClient, type KubeObject } from '../src/controller/kube.js';
import { Kinds } from '../src/controller/reconcilers/common.js';
import { startControlPlane, type ControlPlane } from '../test/support/control-plane.js';
import {
  freePort,
  repoRoot,
  spawnApi,
  spawnWorker,
  startBenchEtcd,
  type BenchApi,
  type BenchEtcd,
  type BenchWorker,
} from './support/processes.js';
import { heading, table } from './support/report.js';
import type { Benchmark } from './support/settings.js';

const CHUNK = 200;
const POLL_MS = 2_000;
const GIVE_UP_MS = 15 * 60_000;

export const controllerScaleBenchmark: Benchmark = {
  name: 'controller-scale',
  description: '1,000 Reactor objects applied at once: time until all are Ready, and the controller peak RSS',
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
  const total = Number(process.env.BENCH_SCALE_REACTORS ?? 1000);
  let plane: ControlPlane | undefined;
  let etcd: BenchEtcd | undefined;
  let worker: BenchWorker | undefined;
  let api: BenchApi | undefined;
  let client: KubeClient | undefined;

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
    const apiPort = await freePort();
    worker = await spawnWorker({ apiUrl: `http://127.0.0.1:${apiPort}`, logLevel: 'warn' });
    api = await spawnApi({
      storeUrl: etcd.storeUrl,
      logLevel: 'warn',
      port: apiPort,
      env: { TOKENVAULT_WORKER_URL: worker.url },
    });
    client = await KubeClient.fromKubeConfig(plane.kubeConfig());

    progress('starting the controller');
    const child = spawn(process.execPath, ['--no-node-snapshot', 'dist/cli.js', 'controller'], {
      cwd: repoRoot,
      env: {
        PATH: process.env.PATH ?? '',
        KUBECONFIG: plane.kubeconfigPath,
        TOKENVAULT_HOST: '127.0.0.1',
        TOKENVAULT_PORT: '0',
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
      `setup Ready; controller RSS ${rssBefore?.toFixed(0)} MiB; applying ${total} Reactors in chunks of ${CHUNK}`,
    );

    const reactor = (i: number) => `apiVersion: tokenvault.dev/v1alpha1
kind: Reactor
metadata: {name: r-${String(i).padStart(4, '0')}, namespace: ${ns}}
spec:
  tenantRef: {name: acme}
  formulaRef: {name: echo}
  applicationRef: {name: app}
  configuration:
    index: {value: "${i}"}
`;
    const started = performance.now();
    const applyMs: number[] = [];
    for (let from = 0; from < total; from += CHUNK) {
      const t = performance.now();
      const docs = Array.from({ length: Math.min(CHUNK, total - from) }, (_, k) => reactor(from + k));
      await plane.kubectl(['apply', '-f', '-'], { input: docs.join('---\n') });
      applyMs.push(performance.now() - t);
    }
    const appliedMs = performance.now() - started;
    progress(`applied in ${(appliedMs / 1000).toFixed(1)} s; waiting for Ready`);

    let peakRss = rssBefore ?? 0;
    let ready = 0;
    let firstReadyMs: number | undefined;
    let halfReadyMs: number | undefined;
    let allReadyMs: number | undefined;
    const reasons = new Map<string, number>();
    while (performance.now() - started < GIVE_UP_MS) {
      const { items } = await client.list<StatusObject>(Kinds.Reactor, ns);
      const elapsed = performance.now() - started;
      ready = items.filter(isReady).length;
      reasons.clear();
      for (const item of items) {
        if (isReady(item)) continue;
        const reason = readyOf(item)?.reason ?? '(no status)';
        reasons.set(reason, (reasons.get(reason) ?? 0) + 1);
      }
      const rss = procMiB(child.pid!, 'VmRSS');
      if (rss !== undefined) peakRss = Math.max(peakRss, rss);
      if (ready > 0) firstReadyMs ??= elapsed;
      if (ready >= total / 2) halfReadyMs ??= elapsed;
      progress(
        `${(elapsed / 1000).toFixed(0)} s: ${ready}/${total} Ready (${items.length} listed), RSS ${rss?.toFixed(0)} MiB${reasons.size ? `, not ready: ${JSON.stringify(Object.fromEntries(reasons))}` : ''}`,
      );
      if (ready >= total) {
        allReadyMs = elapsed;
        break;
      }
      if (child.exitCode !== null || child.signalCode !== null) throw new Error(`the controller exited:\n${tail}`);
      await new Promise((resolve) => setTimeout(resolve, POLL_MS));
    }
    const hwm = procMiB(child.pid!, 'VmHWM');

    // Every Reactor is one vault reactor (ids = uids), none extra.
    const tenant = await client.find<StatusObject & { status?: { id?: string } }>(Kinds.Tenant, ns, 'acme');
    const listed = await fetch(`${api.url}/reactors?size=1`, {
      headers: { 'bt-api-key': api.operatorKey, 'bt-tenant-id': (tenant?.status as { id?: string })?.id ?? '' },
    });
    const vaultCount = listed.ok
      ? ((await listed.json()) as { pagination?: { total_items?: number } }).pagination?.total_items
      : undefined;

    const seconds = (ms: number | undefined) => (ms === undefined ? '-' : `${(ms / 1000).toFixed(1)} s`);
    process.stdout.write(
      [
        heading(`controller scale: ${total} Reactor objects applied at once`),
        table(
          ['measure', 'value'],
          [
            ['kubectl apply (5 chunks of 200)', seconds(appliedMs)],
            ['slowest apply chunk', seconds(Math.max(...applyMs))],
            ['first Ready (from first apply)', seconds(firstReadyMs)],
            ['half Ready', seconds(halfReadyMs)],
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
            ['vault reactors in the tenant', String(vaultCount ?? '?')],
            ['controller error log lines', String(errorLines)],
          ],
          ['l', 'r'],
        ),
        `controller: ${process.env.BENCH_SCALE_WORKERS ?? 'default'} workers, leader election on; polled every ${POLL_MS / 1000} s.`,
        '',
      ].join('\n'),
    );
  } finally {
    progress('stopping');
    await stopController().catch(() => undefined);
    client?.close();
    await api?.stop().catch(() => undefined);
    await worker?.stop().catch(() => undefined);
    await etcd?.stop().catch(() => undefined);
    await plane?.stop().catch(() => undefined);
  }
}
