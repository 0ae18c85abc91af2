// etcd members a fault test owns: a single member or a cluster of three on loopback, each on fixed ports and a data
// dir of its own, so a member can be killed (SIGKILL), stopped (SIGSTOP) and brought back exactly where it was.
// (test/support/etcd.ts starts the shared, throw-away etcd; killing that one would break every other test file.)
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { freePorts, supervise, type Supervised } from './etcd.js';

export interface EtcdMember {
  name: string;
  /** http://127.0.0.1:<client port> */
  endpoint: string;
  /** The process is running (not killed; a SIGSTOPped member is still running). */
  readonly running: boolean;
  /** kill -9, as if the machine died; the data dir stays. */
  kill(): Promise<void>;
  /** Starts it again on the same ports and data dir; resolves when it answers /health (healthy, if it is alone). */
  restart(): Promise<void>;
  /** SIGSTOP: the process still holds its sockets but answers nothing. */
  pause(): void;
  /** SIGCONT. */
  resume(): void;
}

export interface EtcdMembers {
  members: EtcdMember[];
  /** `etcd://host:port,...` for TOKENVAULT_STORE. */
  storeUrl: string;
  /** Stops every member and removes the data dirs. */
  stop(): Promise<void>;
}

/** Starts `count` members as one cluster and waits until every one is healthy. */
export async function startEtcdMembers(count: number): Promise<EtcdMembers> {
  const binary = process.env.TOKENVAULT_ETCD_BIN;
  if (!binary) throw new Error('TOKENVAULT_ETCD_BIN is not set');
  const ports = await freePorts(count * 2);
  const root = await mkdtemp(path.join(os.tmpdir(), 'tokenvault-etcd-members-'));
  const specs = Array.from({ length: count }, (_, i) => ({
    name: `m${i}`,
    client: `http://127.0.0.1:${ports[2 * i]}`,
    peer: `http://127.0.0.1:${ports[2 * i + 1]}`,
    dataDir: path.join(root, `m${i}`),
  }));
  const cluster = specs.map((s) => `${s.name}=${s.peer}`).join(',');

  const members = specs.map((spec) => {
    let child: ChildProcess | undefined;
    let supervised: Supervised | undefined;
    const launch = () => {
      child = spawn(
        binary,
        [
          `--name=${spec.name}`,
          `--data-dir=${spec.dataDir}`,
          `--listen-client-urls=${spec.client}`,
          `--advertise-client-urls=${spec.client}`,
          `--listen-peer-urls=${spec.peer}`,
          `--initial-advertise-peer-urls=${spec.peer}`,
          `--initial-cluster=${cluster}`,
          '--initial-cluster-state=new',
          '--initial-cluster-token=tokenvault-faults',
          '--heartbeat-interval=100',
          '--election-timeout=1000',
          '--unsafe-no-fsync',
          '--log-level=error',
        ],
        { stdio: ['ignore', 'ignore', 'pipe'] },
      );
      supervised = supervise(child, 4_000);
    };
    const member: EtcdMember = {
      name: spec.name,
      endpoint: spec.client,
      get running() {
        return child !== undefined && child.exitCode === null && child.signalCode === null;
      },
      async kill() {
        child?.kill('SIGCONT'); // a stopped process cannot act on SIGKILL until it runs again on some kernels
        await supervised?.stop('SIGKILL');
      },
      async restart() {
        launch();
        // Alone, a member is healthy as soon as it leads itself; in a cluster, once the others let it catch up.
        await waitHealthy(spec.client, () => supervised?.log() ?? '', count === 1);
      },
      pause() {
        child?.kill('SIGSTOP');
      },
      resume() {
        child?.kill('SIGCONT');
      },
    };
    return { member, launch };
  });

  for (const { launch } of members) launch();
  try {
    await Promise.all(specs.map((s) => waitHealthy(s.client, () => '', true)));
  } catch (error) {
    await Promise.all(members.map(({ member }) => member.kill()));
    await rm(root, { recursive: true, force: true });
    throw error;
  }
  return {
    members: members.map(({ member }) => member),
    storeUrl: `etcd://${specs.map((s) => new URL(s.client).host).join(',')}`,
    async stop() {
      await Promise.all(members.map(({ member }) => member.kill()));
      await rm(root, { recursive: true, force: true });
    },
  };
}

/**
 * Waits for /health: with `quorum`, until it reports healthy (a leader and a quorum); without, until the member
 * answers at all (a restarted member of a cluster is only healthy once the others let it catch up).
 */
async function waitHealthy(endpoint: string, log: () => string, quorum: boolean): Promise<void> {
  const deadline = Date.now() + 20_000;
  while (Date.now() < deadline) {
    try {
      const response = await fetch(`${endpoint}/health`, { signal: AbortSignal.timeout(1_000) });
      const body = (await response.json()) as { health?: string };
      if (!quorum || (response.ok && body.health === 'true')) return;
    } catch {
      // not listening yet
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`etcd at ${endpoint} was not healthy within 20 s:\n${log()}`);
}
