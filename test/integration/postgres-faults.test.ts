// Faults of PostgreSQL itself, each on a PostgreSQL of its own (stopping or filling the shared one would break every
// other test file):
//   1. Restarted under load, by a fast shutdown (SIGINT) and by SIGKILL (the machine dying), for a few seconds: while
//      it is down every refused request is 503 TV_STORE_UNAVAILABLE with Retry-After (never a 500, never a hang), once
//      it is back creates succeed again within seconds without restarting the API, and every token whose create was
//      acknowledged (201) reads back with its data (fsync is on: what was acknowledged was flushed).
//   2. Its disk full: the database's tables live in a tablespace on a small tmpfs (WAL stays on the data directory's
//      disk: PostgreSQL PANICs when it cannot write WAL, it answers SQLSTATE 53100 disk_full when it cannot extend a
//      table). Filled through the API, creates answer 507 TV_STORE_FULL without Retry-After, and so does a read of an
//      acknowledged token (it cannot write its audit entry: fail closed, docs/security.md); once the tmpfs is grown,
//      as an operator grows the disk, creates succeed again and everything acknowledged reads back.
//   3. Restarted while two APIs share it: what each keeps in memory follows the other's writes again afterwards (its
//      watch resumed, or its cache dropped): a key deleted through one is refused by the other within seconds, as it
//      is without a restart (replicas.test.ts), so a revocation is never lost to a PostgreSQL restart.
// Mounting a tmpfs needs root (the tests and CI run as root): elsewhere test 2 fails and says so.
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmdirSync, statSync } from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { keys } from '../../src/store/keys.js';
import {
  createApplication,
  createTenant,
  revealingApplication,
  spawnApi,
  startTestApi,
  type ChildApi,
  type TestApi,
} from '../support/api.js';
import { generateApiKey } from '../../src/auth/api-keys.js';
import { client } from '../support/http.js';
import { request, type Outcome } from '../support/load.js';
import { startPostgres, type PostgresProcess } from '../support/postgres.js';
import { eventually } from '../support/wait.js';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Each request's deadline on the client: generous next to the API's 2 s store deadline, so a hang shows. */
const CLIENT_TIMEOUT_MS = 10_000;
const STORE_TIMEOUT_MS = '2000';
const NO_RATE_LIMITS = {
  TOKENVAULT_RATE_LIMIT_API_PER_KEY: '0',
  TOKENVAULT_RATE_LIMIT_API_PER_TENANT: '0',
  TOKENVAULT_RATE_LIMIT_CALLS_PER_KEY: '0',
  TOKENVAULT_RATE_LIMIT_CALLS_PER_TENANT: '0',
};

describe('PostgreSQL restarted under load', () => {
  const CLIENTS = 8;
  /** Bounds of each run's load: whichever comes first. */
  const MAX_REQUESTS = 6_000;
  const DOWN_MS = 4_000;
  /** Creates must succeed again within this long of PostgreSQL being ready again. */
  const RECOVER_WITHIN_MS = 10_000;

  let postgres: PostgresProcess;
  let api: TestApi;
  let userKey: string;
  const agent = new http.Agent({ keepAlive: true, maxSockets: CLIENTS * 2 });

  beforeAll(async () => {
    postgres = await startPostgres();
    api = await startTestApi({
      TOKENVAULT_STORE: postgres.url,
      TOKENVAULT_STORE_REQUEST_TIMEOUT_MS: STORE_TIMEOUT_MS,
      ...NO_RATE_LIMITS,
    });
    const { managementKey } = await createTenant(api.url, api.operatorKey);
    userKey = (await revealingApplication(api.url, managementKey, ['token:create', 'token:read'])).key;
  }, 60_000);

  afterAll(async () => {
    agent.destroy();
    await api?.close();
    await postgres?.stop();
  });

  const send = (method: string, path: string, json?: unknown) =>
    request(api.url, method, path, { headers: { 'BT-API-KEY': userKey }, json, timeoutMs: CLIENT_TIMEOUT_MS, agent });

  test.each([
    ['a fast shutdown (SIGINT)', 'SIGINT'],
    ['SIGKILL, as if the machine died', 'SIGKILL'],
  ] as const)(
    'stopped by %s for 4 s: 503 with Retry-After while down, nothing acknowledged lost',
    async (_, signal) => {
      /** Every acknowledged token: id → data. */
      const acknowledged = new Map<string, string>();
      /** Every answer that was not a success, and whether PostgreSQL was down for all of the request. */
      const refused: { outcome: Outcome; whileDown: boolean }[] = [];
      let requests = 0;
      let down = false;
      let downSince = Infinity;
      let upAgainAt = Infinity;
      let running = true;

      const one = async (n: number) => {
        const started = Date.now();
        let outcome: Outcome;
        let created: [string, string][] = [];
        if (n % 10 < 8) {
          const data = `value-${n}-${randomBytes(6).toString('hex')}`;
          outcome = await send('POST', '/tokens', { type: 'token', data });
          if (outcome.status === 201) created = [[outcome.body.id, data]];
        } else {
          const data = Array.from({ length: 5 }, (_, i) => `batch-${n}-${i}-${randomBytes(6).toString('hex')}`);
          outcome = await send(
            'POST',
            '/tokenize',
            data.map((value) => ({ type: 'token', data: value })),
          );
          if (outcome.status === 200 || outcome.status === 201)
            created = (outcome.body as { id: string }[]).map((token, i) => [token.id, data[i]]);
        }
        for (const [id, data] of created) acknowledged.set(id, data);
        if (created.length === 0) {
          const whileDown = started >= downSince && Date.now() <= upAgainAt;
          refused.push({ outcome, whileDown });
        }
      };
      const loops = Array.from({ length: CLIENTS }, async () => {
        while (running && requests < MAX_REQUESTS) {
          await one(requests++);
          await sleep(5);
        }
      });

      let recoveredMs: number | undefined;
      try {
        await sleep(2_000);
        const acknowledgedBefore = acknowledged.size;
        expect(acknowledgedBefore).toBeGreaterThan(0);
        await postgres.stopKeepingData(signal);
        down = true;
        downSince = Date.now();
        await sleep(DOWN_MS);
        await postgres.start();
        upAgainAt = Date.now();
        down = false;
        // Creates succeed again, through the same API (its pool reconnects by itself).
        for (;;) {
          const probe = await send('POST', '/tokens', { type: 'token', data: 'probe' });
          if (probe.status === 201) break;
          if (Date.now() - upAgainAt > RECOVER_WITHIN_MS)
            throw new Error(`no create succeeded within ${RECOVER_WITHIN_MS} ms: ${probe.status ?? probe.failure}`);
          await sleep(100);
        }
        recoveredMs = Date.now() - upAgainAt;
        const acknowledgedAtRecovery = acknowledged.size;
        await sleep(1_500);
        // The load's own creates succeed again too.
        expect(acknowledged.size).toBeGreaterThan(acknowledgedAtRecovery);
      } finally {
        running = false;
        await Promise.all(loops);
        if (down) await postgres.start();
      }

      // Every acknowledged token reads back with its data.
      const ids = [...acknowledged.keys()];
      const lost: string[] = [];
      for (let i = 0; i < ids.length; i += 16) {
        await Promise.all(
          ids.slice(i, i + 16).map(async (id) => {
            const read = await send('GET', `/tokens/${id}`);
            if (read.status !== 200 || read.body.data !== acknowledged.get(id))
              lost.push(`${id}: ${read.status ?? read.failure} ${JSON.stringify(read.body)}`);
          }),
        );
      }

      const count = (outcomes: Outcome[]) => {
        const by: Record<string, number> = {};
        for (const o of outcomes) by[o.status ?? o.failure] = (by[o.status ?? o.failure] ?? 0) + 1;
        return by;
      };
      const whileDown = refused.filter((r) => r.whileDown).map((r) => r.outcome);
      console.log(
        `PostgreSQL stopped by ${signal} for ${DOWN_MS} ms under ${CLIENTS} clients: ${requests} requests, ` +
          `${acknowledged.size} tokens acknowledged, refused ${JSON.stringify(count(refused.map((r) => r.outcome)))} ` +
          `(while down: ${JSON.stringify(count(whileDown))}), creates succeeded again ${recoveredMs} ms after it ` +
          `was ready, lost: ${lost.length}`,
      );

      expect(lost).toEqual([]);
      expect(whileDown.length).toBeGreaterThan(0);
      // Whatever was refused, down or not (a request cut off by the shutdown, a reconnect after it), was a 503 with
      // Retry-After and a problem document naming it: no 500, no other status, no request hung past its deadline.
      const unexpected = refused
        .map((r) => r.outcome)
        .filter((o) => o.status !== 503 || !o.retryAfter || o.body?.code !== 'TV_STORE_UNAVAILABLE')
        .map(
          (o) =>
            `${o.status ?? o.failure} retry-after=${o.retryAfter} ${JSON.stringify(o.failure ? o.detail : o.body)}`,
        );
      expect(unexpected).toEqual([]);
      // Each refusal while down came after one store deadline, not after TCP's own timeouts.
      for (const o of whileDown) expect(o.ms).toBeLessThan(CLIENT_TIMEOUT_MS / 2);
    },
    120_000,
  );
});

describe('PostgreSQL restarted under two APIs', () => {
  /** How soon after the delete the other API must refuse the key: a watch takes well under a second. */
  const REFUSED_WITHIN_MS = 5_000;
  const operatorKey = generateApiKey();
  let postgres: PostgresProcess;
  let one: ChildApi;
  let two: ChildApi;

  beforeAll(async () => {
    postgres = await startPostgres();
    const env = {
      TOKENVAULT_STORE: postgres.url,
      TOKENVAULT_OPERATOR_KEY: operatorKey,
      TOKENVAULT_STORE_REQUEST_TIMEOUT_MS: STORE_TIMEOUT_MS,
    };
    [one, two] = await Promise.all([spawnApi(['api'], env), spawnApi(['api'], env)]);
  }, 60_000);

  afterAll(async () => {
    await Promise.all([one?.stop(), two?.stop()]);
    await postgres?.stop();
  });

  test.each([['SIGINT'], ['SIGKILL']] as const)(
    'after a restart (%s), a key deleted through one API is refused by the other within seconds',
    async (signal) => {
      const { managementKey } = await createTenant(one.url, operatorKey);
      const app = await createApplication(one.url, managementKey, {
        name: 'revoked-after-restart',
        type: 'private',
        permissions: ['token:use'],
      });
      // The other API has the key in its cache before the restart, so only its watch (or a dropped cache) can refuse it.
      expect((await client(two.url, app.key).get('/applications/key')).status).toBe(200);
      await postgres.restart(signal);
      // Both answer again (their pools reconnect by themselves), the other still from its cache or a fresh read.
      await eventually(
        async () => expect((await client(two.url, app.key).get('/applications/key')).status).toBe(200),
        15_000,
      );
      await eventually(
        async () => expect((await client(one.url, managementKey).delete(`/applications/${app.id}`)).status).toBe(204),
        15_000,
      );
      const deletedAt = Date.now();
      await eventually(
        async () => expect((await client(two.url, app.key).get('/applications/key')).status).toBe(401),
        REFUSED_WITHIN_MS,
      );
      expect(Date.now() - deletedAt).toBeLessThan(REFUSED_WITHIN_MS);
    },
    60_000,
  );
});

describe('PostgreSQL out of disk', () => {
  const SMALL = '32m';
  const LARGER = '128m';
  /** Bounds of the filling: 100 card tokens with 400 bytes of metadata a request fill 32 MiB in some hundreds. */
  const MAX_REQUESTS = 2_000;
  const FILL_WITHIN_MS = 150_000;
  const MAX_READS = 20_000;

  let postgres: PostgresProcess;
  let api: TestApi;
  let mountPoint: string | undefined;
  let mounted = false;

  beforeAll(async () => {
    if (process.getuid?.() !== 0)
      throw new Error('this test mounts a tmpfs for a tablespace and needs root; run it as root (as CI does)');
    postgres = await startPostgres();
    mountPoint = mkdtempSync(path.join(os.tmpdir(), 'tokenvault-pg-small-'));
    // Owned by the server's user (the owner of its data directory), who alone may use it (PostgreSQL insists).
    const { uid, gid } = statSync(postgres.dataDir);
    execFileSync('mount', [
      '-t',
      'tmpfs',
      '-o',
      `size=${SMALL},mode=0700,uid=${uid},gid=${gid}`,
      'tokenvault-pg-small',
      mountPoint,
    ]);
    mounted = true;
    const superuser = new pg.Client({
      host: postgres.host,
      port: postgres.port,
      user: 'postgres',
      password: postgres.password,
      database: 'postgres',
    });
    await superuser.connect();
    try {
      await superuser.query(`CREATE TABLESPACE small OWNER ${postgres.user} LOCATION '${mountPoint}'`);
      // Every table and index of this database, tokenvault's included (its migration creates them), goes there.
      await superuser.query(`CREATE DATABASE tv_small OWNER ${postgres.user} TABLESPACE small`);
    } finally {
      await superuser.end();
    }
    const url = new URL(postgres.url);
    url.pathname = '/tv_small';
    api = await startTestApi({
      TOKENVAULT_STORE: url.toString(),
      TOKENVAULT_STORE_REQUEST_TIMEOUT_MS: '5000',
      ...NO_RATE_LIMITS,
    });
  }, 60_000);

  afterAll(async () => {
    await api?.close();
    await postgres?.stop();
    if (mounted) {
      try {
        execFileSync('umount', [mountPoint!]);
      } catch {
        execFileSync('umount', ['-l', mountPoint!]); // still busy: detach it now, freed once unused
      }
    }
    if (mountPoint) rmdirSync(mountPoint);
  });

  /** A Luhn-valid 16-digit card number, distinct for each n. */
  function cardNumber(n: number): string {
    const body = `4${String(n).padStart(14, '0')}`;
    let sum = 0;
    for (let i = 0; i < body.length; i++) {
      let digit = Number(body[body.length - 1 - i]);
      if (i % 2 === 0) digit = digit * 2 > 9 ? digit * 2 - 9 : digit * 2;
      sum += digit;
    }
    return `${body}${(10 - (sum % 10)) % 10}`;
  }

  function expectStoreFull(answer: Outcome) {
    expect({ status: answer.status, body: answer.body }).toMatchObject({
      status: 507,
      body: { status: 507, code: 'TV_STORE_FULL', title: 'Insufficient Storage' },
    });
    expect(answer.body.detail).toContain('disk');
    // Not a passing outage: nothing tells the client to come back in a second.
    expect(answer.retryAfter).toBeUndefined();
  }

  test('a full disk answers 507 TV_STORE_FULL to creates and audited reads; grown, it loses nothing', async () => {
    const { tenantId, managementKey } = await createTenant(api.url, api.operatorKey);
    const key = (await revealingApplication(api.url, managementKey, ['token:create', 'token:read'])).key;
    const send = (method: string, path: string, json?: unknown) =>
      request(api.url, method, path, { headers: { 'BT-API-KEY': key }, json, timeoutMs: 30_000 });

    const acknowledged = new Map<string, string>();
    const started = Date.now();
    let refusal: Outcome | undefined;
    let requests = 0;
    for (; requests < MAX_REQUESTS && Date.now() - started < FILL_WITHIN_MS; requests++) {
      const numbers = Array.from({ length: 100 }, (_, i) => cardNumber(requests * 100 + i));
      const answer = await send(
        'POST',
        '/tokenize',
        numbers.map((number) => ({
          type: 'card',
          data: { number, expiration_month: 12, expiration_year: 2040, cvc: '123' },
          metadata: { filler: 'x'.repeat(400) },
        })),
      );
      if (answer.status !== 200 && answer.status !== 201) {
        refusal = answer;
        break;
      }
      (answer.body as { id: string }[]).forEach((token, i) => acknowledged.set(token.id, numbers[i]));
    }
    console.log(
      `PostgreSQL on a ${SMALL} tablespace: ${acknowledged.size} card tokens acknowledged in ${requests} requests ` +
        `(${Date.now() - started} ms) before ${refusal?.status ?? refusal?.failure}`,
    );
    expect(refusal).toBeDefined();
    expectStoreFull(refusal!);
    expect(acknowledged.size).toBeGreaterThan(0);

    // Another bulk create of the same size: still full (its tokens need the room the refused one lacked).
    const more = Array.from({ length: 100 }, (_, i) => cardNumber(90_000_000 + i));
    expectStoreFull(
      await send(
        'POST',
        '/tokenize',
        more.map((number) => ({ type: 'card', data: { number, expiration_month: 1, expiration_year: 2041 } })),
      ),
    );
    // Reads of acknowledged tokens need their audit entries. Unlike etcd's quota, a full disk still takes a small row
    // into pages already allocated, so the first reads may be audited and answered; once an entry cannot be stored
    // the read is refused, named the same, and its data not sent (docs/security.md, "Accountability").
    const ids = [...acknowledged.keys()];
    let answeredReads = 0;
    let refusedRead: Outcome | undefined;
    const readsFrom = Date.now();
    for (let i = 0; i < MAX_READS && Date.now() - readsFrom < FILL_WITHIN_MS; i++) {
      const id = ids[i % ids.length];
      const read = await send('GET', `/tokens/${id}`);
      if (read.status !== 200) {
        refusedRead = read;
        expect(JSON.stringify(read.body)).not.toContain(acknowledged.get(id));
        break;
      }
      expect(read.body.data.number).toBe(acknowledged.get(id));
      answeredReads += 1;
    }
    console.log(`on the full disk, ${answeredReads} token reads were audited and answered before one was refused`);
    expect(refusedRead).toBeDefined();
    expectStoreFull(refusedRead!);

    // The operator grows the disk: writes succeed as soon as there is room (no alarm to disarm, no restart).
    execFileSync('mount', ['-o', `remount,size=${LARGER}`, mountPoint!]);
    await eventually(async () => {
      expect((await send('POST', '/tokens', { type: 'token', data: 'room again' })).status).toBe(201);
    }, 10_000);

    // Every acknowledged token is in the store; each reads back through the API with its card.
    for (let i = 0; i < ids.length; i += 500) {
      const chunk = ids.slice(i, i + 500);
      const found = await api.context.store.getMany(chunk.map((id) => keys.token(tenantId, id)));
      expect(chunk.filter((id) => !found.has(keys.token(tenantId, id)))).toEqual([]);
    }
    const wrong: string[] = [];
    for (let i = 0; i < ids.length; i += 16) {
      await Promise.all(
        ids.slice(i, i + 16).map(async (id) => {
          const answer = await send('GET', `/tokens/${id}`);
          if (answer.status !== 200 || answer.body.data?.number !== acknowledged.get(id))
            wrong.push(`${id}: ${answer.status ?? answer.failure}`);
        }),
      );
    }
    expect(wrong).toEqual([]);
  }, 300_000);
});
