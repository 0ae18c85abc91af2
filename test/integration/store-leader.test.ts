// etcd leader changes under load (issue 17, point 6): a three-member etcd cluster on loopback, an API process given
// all three endpoints, and a steady load of token writes and reads while leadership moves (etcd's move-leader, as an
// operator or a rolling etcd upgrade does it) and then while the leader is killed (kill -9) and restarted. Writes go
// on after a bounded blip, every error meanwhile is a 503 with Retry-After, and nothing acknowledged is lost.
import { afterAll, beforeAll, expect, test } from '@jest/globals';
import http from 'node:http';
import { Etcd3 } from 'etcd3';
import { generateApiKey } from '../../src/auth/api-keys.js';
import { createTenant, revealingApplication } from '../support/api.js';
import { freePorts } from '../support/etcd.js';
import { startEtcdMembers, type EtcdMember, type EtcdMembers } from '../support/etcd-members.js';
import { startReplica, type Replica } from '../support/fleet.js';
import { request, Tally } from '../support/load.js';

const LOOPS = 4;
const operatorKey = generateApiKey();
let etcd: EtcdMembers;
let api: Replica;
let key: string;

beforeAll(async () => {
  etcd = await startEtcdMembers(3);
  const [port] = await freePorts(1);
  api = await startReplica('api', port, {
    TOKENVAULT_STORE: etcd.storeUrl,
    TOKENVAULT_OPERATOR_KEY: operatorKey,
    TOKENVAULT_ETCD_REQUEST_TIMEOUT_MS: '2000',
    TOKENVAULT_RATE_LIMIT_API_PER_KEY: '0',
    TOKENVAULT_RATE_LIMIT_API_PER_TENANT: '0',
  });
  const { managementKey } = await createTenant(api.url, operatorKey);
  key = (await revealingApplication(api.url, managementKey, ['token:create', 'token:read'])).key;
}, 90_000);

afterAll(async () => {
  await api?.kill();
  await etcd?.stop();
});

/** The member that leads, asked of each running member in turn; and etcd's id of each member. */
async function leadership(): Promise<{ leader: EtcdMember; ids: Map<EtcdMember, string> }> {
  const ids = new Map<EtcdMember, string>();
  let leaderId: string | undefined;
  for (const member of etcd.members.filter((m) => m.running)) {
    const client = new Etcd3({ hosts: member.endpoint });
    try {
      const status = await client.maintenance.status();
      ids.set(member, status.header.member_id);
      leaderId = status.leader;
    } finally {
      client.close();
    }
  }
  const leader = [...ids].find(([, id]) => id === leaderId)?.[0];
  if (!leader) throw new Error('no leader');
  return { leader, ids };
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const agent = new http.Agent({ keepAlive: true });
const send = (method: string, path: string, json?: unknown) =>
  request(api.url, method, path, { headers: { 'BT-API-KEY': key }, json, timeoutMs: 10_000, agent });

const written = new Map<string, string>();
const wrongReads: string[] = [];

interface Phase {
  name: string;
  tally: Tally;
  /** From the start of the first failed request to the end of the last one: how long writes were interrupted. */
  blipMs: number;
  leaderBefore: string;
  leaderAfter: string;
}

/** Load through `fault`, with a second of steady load before and two after. */
async function underLoad(name: string, fault: () => Promise<void>): Promise<Phase> {
  const tally = new Tally();
  let firstFailure: number | undefined;
  let lastFailure: number | undefined;
  let running = true;
  let n = 0;
  const loops = Array.from({ length: LOOPS }, async () => {
    while (running) {
      const i = n++;
      const began = Date.now();
      let outcome;
      if (i % 2 === 0 || written.size === 0) {
        const data = `v-${name}-${i}`;
        outcome = await send('POST', '/tokens', { type: 'token', data });
        if (outcome.status === 201) written.set(outcome.body.id, data);
      } else {
        const ids = [...written.keys()];
        const id = ids[i % ids.length];
        outcome = await send('GET', `/tokens/${id}`);
        if (outcome.status === 404 || (outcome.status === 200 && outcome.body.data !== written.get(id)))
          wrongReads.push(`${id}: ${outcome.status}`);
      }
      tally.add(name, outcome);
      if (outcome.status === undefined || outcome.status >= 300) {
        firstFailure = Math.min(firstFailure ?? began, began);
        lastFailure = Date.now();
      }
      await sleep(10);
    }
  });
  const { leader: before, ids } = await leadership();
  try {
    await sleep(1_000);
    await fault();
    await sleep(2_000);
  } finally {
    running = false;
    await Promise.all(loops);
  }
  const { leader: after } = await leadership();
  return {
    name,
    tally,
    blipMs: firstFailure === undefined ? 0 : lastFailure! - firstFailure,
    leaderBefore: `${before.name} (${ids.get(before)})`,
    leaderAfter: after.name,
  };
}

test('writes go on after a bounded blip when etcd leadership moves or the leader dies, and nothing is lost', async () => {
  const phases: Phase[] = [];
  phases.push(
    await underLoad('move-leader', async () => {
      const { leader, ids } = await leadership();
      const target = etcd.members.find((m) => m !== leader)!;
      // etcdctl move-leader: the request goes to the current leader.
      const client = new Etcd3({ hosts: leader.endpoint });
      try {
        await client.maintenance.moveLeader({ targetID: ids.get(target)! });
      } finally {
        client.close();
      }
      expect((await leadership()).leader).toBe(target);
    }),
  );
  phases.push(
    await underLoad('leader kill -9, restarted after 3 s', async () => {
      const { leader } = await leadership();
      await leader.kill();
      await sleep(3_000);
      await leader.restart();
    }),
  );

  // Every acknowledged write reads back identical.
  const lost: string[] = [];
  const ids = [...written.keys()];
  for (let i = 0; i < ids.length; i += 8) {
    await Promise.all(
      ids.slice(i, i + 8).map(async (id) => {
        const answer = await send('GET', `/tokens/${id}`);
        if (answer.status !== 200 || answer.body.data !== written.get(id)) lost.push(id);
      }),
    );
  }
  console.log(
    `etcd leader changes under load (3 members, ${LOOPS} clients):\n` +
      phases
        .map((p) =>
          JSON.stringify({
            fault: p.name,
            leader: `${p.leaderBefore} -> ${p.leaderAfter}`,
            requests: p.tally.requests,
            acknowledged: p.tally.acknowledged,
            errors: p.tally.errors,
            'blip (ms)': p.blipMs,
          }),
        )
        .join('\n') +
      `\nacknowledged token writes: ${ids.length}, lost: ${lost.length}`,
  );
  expect(lost).toEqual([]);
  expect(wrongReads).toEqual([]);
  for (const phase of phases) {
    expect({ phase: phase.name, statuses: phase.tally.statuses().filter((s) => s !== 503) }).toEqual({
      phase: phase.name,
      statuses: [],
    });
    expect(phase.tally.unavailableWithoutRetryAfter).toBe(0);
    expect(phase.tally.errors.timeout ?? 0).toBe(0);
    // Bounded: an election (1 s election timeout here) plus the client's breaker and one request deadline.
    expect(phase.blipMs).toBeLessThan(6_000);
    expect(phase.tally.acknowledged).toBeGreaterThan(50);
  }
}, 180_000);
