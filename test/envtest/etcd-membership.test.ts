// etcd membership with the chart's own etcd flags and a real etcd (issue 14 point 2). Three etcd processes on loopback
// run with the arguments the chart renders for its StatefulSet, only the pod DNS names and ports mapped to loopback:
// - the documented path from 1 to 3 members (etcdctl member add --learner, then the chart with
//   etcd.initialClusterState=existing and 2, then 3 replicas, then member promote) keeps the data and gives three
//   voting members;
// - what the chart now refuses (values-ha.yaml straight onto a running one-member etcd: new members with
//   --initial-cluster-state=new) makes two of them form a second, empty cluster: a split brain.

import { spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeAll, expect, test } from '@jest/globals';
import { Etcd3 } from 'etcd3';
import { parseManifests, repoRoot, run } from '../support/manifests.js';
import { freePorts, supervise, type Supervised } from '../support/etcd.js';
import { toolBinary } from '../support/control-plane.js';

const chartDir = path.join(repoRoot, 'charts/tokenvault');
const NAME = 'tv-tokenvault-etcd';
const HEADLESS = 'tv-tokenvault-etcd-headless';
const NAMESPACE = 'tokenvault';

let helmBinary: string;
let etcdBinary: string;
const cleanups: Array<() => Promise<void>> = [];

beforeAll(async () => {
  helmBinary = await toolBinary('helm');
  etcdBinary = process.env.TOKENVAULT_ETCD_BIN ?? (await toolBinary('etcd'));
}, 60_000);

afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
}, 30_000);

/** The etcd container's args the chart renders (etcd TLS off: the loopback members have no certificates). */
async function chartArgs(values: string[]): Promise<string[]> {
  const { stdout } = await run(helmBinary, [
    'template',
    'tv',
    chartDir,
    '--namespace',
    NAMESPACE,
    '--set',
    'etcd.tls.enabled=false',
    ...values,
  ]);
  const sts = parseManifests(stdout).find((o) => o.kind === 'StatefulSet' && o.metadata.name === NAME)!;
  return sts.spec.template.spec.containers[0].args;
}

interface Ports {
  client: number;
  peer: number;
  metrics: number;
}

/** Starts member `index` with the chart's args, pod DNS names and ports mapped to loopback. */
async function startMember(
  index: number,
  args: string[],
  ports: Ports[],
  dataDir: string,
): Promise<{ endpoint: string; process: Supervised }> {
  const pod = `${NAME}-${index}`;
  const own = ports[index];
  const mapped = args.map((arg) =>
    arg
      .replaceAll('$(POD_NAME)', pod)
      .replaceAll('$(POD_NAMESPACE)', NAMESPACE)
      .replace(/^--data-dir=.*/, `--data-dir=${dataDir}`)
      .replace(/^--listen-client-urls=http:\/\/0\.0\.0\.0:2379$/, `--listen-client-urls=http://127.0.0.1:${own.client}`)
      .replace(/^--listen-peer-urls=http:\/\/0\.0\.0\.0:2380$/, `--listen-peer-urls=http://127.0.0.1:${own.peer}`)
      .replace(
        /^--listen-metrics-urls=http:\/\/0\.0\.0\.0:2381$/,
        `--listen-metrics-urls=http://127.0.0.1:${own.metrics}`,
      )
      .replace(
        new RegExp(`${NAME}-(\\d)\\.${HEADLESS}\\.${NAMESPACE}\\.svc:(2379|2380)`, 'g'),
        (_, member: string, port: string) =>
          `127.0.0.1:${port === '2379' ? ports[Number(member)].client : ports[Number(member)].peer}`,
      ),
  );
  expect(mapped.filter((arg) => /0\.0\.0\.0|\.svc/.test(arg))).toEqual([]);
  const child = spawn(etcdBinary, [...mapped, '--unsafe-no-fsync', '--log-level=error'], {
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  const process = supervise(child, 8_000);
  cleanups.push(() => process.stop('SIGKILL'));
  return { endpoint: `http://127.0.0.1:${own.client}`, process };
}

async function dataDirs(count: number): Promise<string[]> {
  const dirs = await Promise.all(
    Array.from({ length: count }, () => mkdtemp(path.join(os.tmpdir(), 'tokenvault-etcd-member-'))),
  );
  cleanups.unshift(async () => {
    await Promise.all(dirs.map((dir) => rm(dir, { recursive: true, force: true })));
  });
  return dirs;
}

function client(endpoint: string): Etcd3 {
  const etcd = new Etcd3({ hosts: endpoint, dialTimeout: 2_000 });
  cleanups.push(async () => etcd.close());
  return etcd;
}

/** Retries `attempt` every 250 ms until it resolves, for at most `ms`. */
async function eventually<T>(attempt: () => Promise<T>, ms = 20_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    try {
      return await attempt();
    } catch (error) {
      if (Date.now() > deadline) throw error;
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
  }
}

async function allPorts(): Promise<Ports[]> {
  const flat = await freePorts(9);
  return [0, 1, 2].map((i) => ({ client: flat[i * 3], peer: flat[i * 3 + 1], metrics: flat[i * 3 + 2] }));
}

test('the documented path from 1 to 3 members, with the chart’s flags: member add as learners, existing state, promote; the data stays', async () => {
  const ports = await allPorts();
  const dirs = await dataDirs(3);
  const first = await startMember(0, await chartArgs([]), ports, dirs[0]);
  const etcd0 = client(first.endpoint);
  await eventually(async () => {
    await etcd0.put('tokens/1').value('kept');
  });

  for (const index of [1, 2]) {
    const peer = `http://127.0.0.1:${ports[index].peer}`;
    const added = await eventually(() => etcd0.cluster.memberAdd({ peerURLs: [peer], isLearner: true }));
    const replicas = String(index + 1);
    await startMember(
      index,
      await chartArgs(['--set', `etcd.replicas=${replicas}`, '--set', 'etcd.initialClusterState=existing']),
      ports,
      dirs[index],
    );
    // etcd promotes a learner only once it has caught up with the leader.
    await eventually(() => etcd0.cluster.memberPromote({ ID: added.member.ID }));
  }
  const { members } = await etcd0.cluster.memberList({ linearizable: true });
  expect(
    members.map((m) => ({ name: m.name, learner: m.isLearner })).sort((a, b) => a.name.localeCompare(b.name)),
  ).toEqual([
    { name: `${NAME}-0`, learner: false },
    { name: `${NAME}-1`, learner: false },
    { name: `${NAME}-2`, learner: false },
  ]);
  // The third member serves the data written before it joined.
  const etcd2 = client(`http://127.0.0.1:${ports[2].client}`);
  expect(await eventually(() => etcd2.get('tokens/1').string())).toBe('kept');
}, 90_000);

test('what the chart refuses: new members with --initial-cluster-state=new next to a running etcd form a second, empty cluster', async () => {
  const ports = await allPorts();
  const dirs = await dataDirs(3);
  const first = await startMember(0, await chartArgs([]), ports, dirs[0]);
  const etcd0 = client(first.endpoint);
  await eventually(async () => {
    await etcd0.put('tokens/1').value('kept');
  });

  // values-ha.yaml's three members, as a plain `helm upgrade` rendered them before this chart refused it.
  const ha = await chartArgs(['--set', 'etcd.replicas=3']);
  expect(ha).toContain('--initial-cluster-state=new');
  await startMember(1, ha, ports, dirs[1]);
  await startMember(2, ha, ports, dirs[2]);
  const etcd1 = client(`http://127.0.0.1:${ports[1].client}`);
  // Members 1 and 2 are a quorum of their own: writes succeed there, and the data of member 0 is not there.
  await eventually(async () => {
    await etcd1.put('tokens/2').value('elsewhere');
  }, 30_000);
  expect(await etcd1.get('tokens/1').string()).toBeNull();
  expect(await etcd0.get('tokens/2').string()).toBeNull();
  const [status0, status1] = await Promise.all([etcd0.maintenance.status(), etcd1.maintenance.status()]);
  expect(status0.header.cluster_id).not.toBe(status1.header.cluster_id);
}, 90_000);
