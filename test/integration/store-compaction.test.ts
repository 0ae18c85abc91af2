// A watch gap that etcd compacts over (issue 17, point 6). The API reaches its own etcd through a TCP relay on loopback
// that the test can cut: while the API is cut off, a second API (straight to etcd) revokes keys, writes on, and etcd
// is compacted past everything the first API's watches saw. When the relay is back, the watches cannot resume where
// they stopped (that revision is gone): they must start again from now and the caches must drop what they held, so
// the first API never accepts a key revoked during the gap, and keys revoked after it are refused within a second
// (a stalled watch would let a cached key work until its cache entry expires, TOKENVAULT_KEY_CACHE_SECONDS). And while
// a watch is down, its cache keeps nothing: with etcd reachable by other means (another member) every read is fresh.
import { afterAll, beforeAll, expect, test } from '@jest/globals';
import net from 'node:net';
import { Etcd3 } from 'etcd3';
import { openStore } from '../../src/store/open.js';
import { WatchedCache } from '../../src/store/watched-cache.js';
import { createApplication, createTenant, startTestApi, type TestApi } from '../support/api.js';
import { startEtcd, type EtcdProcess } from '../support/etcd.js';
import { client } from '../support/http.js';
import { eventually, sleep } from '../support/wait.js';

/** A TCP relay to `target` on a fixed loopback port; `cut` drops every connection and refuses new ones until `restore`. */
class Relay {
  private readonly sockets = new Set<net.Socket>();
  private server?: net.Server;
  port = 0;

  constructor(private readonly target: { host: string; port: number }) {}

  async start(): Promise<void> {
    const server = net.createServer((inbound) => {
      const outbound = net.connect(this.target);
      for (const socket of [inbound, outbound]) {
        this.sockets.add(socket);
        socket.on('close', () => this.sockets.delete(socket));
        socket.on('error', () => undefined);
      }
      inbound.pipe(outbound).pipe(inbound);
    });
    await new Promise<void>((resolve) => server.listen(this.port, '127.0.0.1', resolve));
    this.port = (server.address() as net.AddressInfo).port;
    this.server = server;
  }

  async cut(): Promise<void> {
    const server = this.server;
    this.server = undefined;
    const closed = server ? new Promise((resolve) => server.close(resolve)) : undefined;
    for (const socket of this.sockets) socket.destroy();
    await closed;
  }

  async restore(): Promise<void> {
    if (!this.server) await this.start();
  }
}

let etcd: EtcdProcess;
let relay: Relay;
let direct: Etcd3;
let cutOff: TestApi;
let other: TestApi;

beforeAll(async () => {
  etcd = await startEtcd();
  const target = new URL(etcd.endpoint);
  relay = new Relay({ host: target.hostname, port: Number(target.port) });
  await relay.start();
  direct = new Etcd3({ hosts: etcd.endpoint });
  cutOff = await startTestApi({ TOKENVAULT_STORE: `etcd://127.0.0.1:${relay.port}` });
  other = await startTestApi({ TOKENVAULT_STORE: `etcd://${target.host}` });
}, 60_000);

afterAll(async () => {
  await relay?.restore().catch(() => undefined);
  await Promise.all([cutOff?.close(), other?.close()]);
  direct?.close();
  await relay?.cut();
  await etcd?.stop();
}, 30_000);

test('a key revoked while a watch was cut off and compacted over is refused once the watch is back, and later revocations within a second', async () => {
  const { managementKey } = await createTenant(other.url, other.operatorKey);
  const revokedInGap = await createApplication(other.url, managementKey, {
    name: 'revoked in the gap',
    type: 'private',
    permissions: ['token:use'],
  });
  const revokedAfter = await createApplication(other.url, managementKey, {
    name: 'revoked after',
    type: 'private',
    permissions: ['token:use'],
  });
  // Both keys are in the cut-off API's cache.
  for (const app of [revokedInGap, revokedAfter])
    expect((await client(cutOff.url, app.key).get('/applications/key')).status).toBe(200);

  await relay.cut();
  await sleep(300); // the cut-off API notices its broken connection (as it does when a member dies or restarts)
  expect((await client(other.url, managementKey).delete(`/applications/${revokedInGap.id}`)).status).toBe(204);
  // From the revocation on, the cut-off API never accepts the key: 503 while it cannot reach etcd, then 401. Asked
  // all along, not only once the watch is back, so a cache that served it in the gap or just after would show here.
  const answers: number[] = [];
  let asking = true;
  const asker = (async () => {
    while (asking) {
      answers.push((await client(cutOff.url, revokedInGap.key).get('/applications/key')).status);
      await sleep(50);
    }
  })();
  // Write on, then compact past every revision the cut-off API saw, so its watches cannot resume.
  for (let i = 0; i < 20; i++) await direct.put(`/compaction-test/${i}`).value('x');
  const { header } = await direct.kv.range({ key: Buffer.from('/compaction-test/0') });
  await direct.kv.compact({ revision: header.revision, physical: true });

  await relay.restore();
  // Back: the revoked key is refused (bounded: gRPC reconnects with backoff, at most 5 s here).
  const back = Date.now();
  await eventually(
    async () => expect((await client(cutOff.url, revokedInGap.key).get('/applications/key')).status).toBe(401),
    10_000,
  );
  const refusedAfterMs = Date.now() - back;
  await sleep(500);
  asking = false;
  await asker;
  expect(answers.filter((status) => status !== 503 && status !== 401)).toEqual([]);
  expect(answers.at(-1)).toBe(401);

  // The watches work again: the other key, still valid and cached anew, is revoked through the other API and the
  // cut-off API refuses it within a second (a stalled watch would keep serving it from the cache).
  await eventually(
    async () => expect((await client(cutOff.url, revokedAfter.key).get('/applications/key')).status).toBe(200),
    10_000,
  );
  await sleep(1_000); // let every watch re-establish after the compaction
  expect((await client(cutOff.url, revokedAfter.key).get('/applications/key')).status).toBe(200);
  expect((await client(other.url, managementKey).delete(`/applications/${revokedAfter.id}`)).status).toBe(204);
  const deletedAt = Date.now();
  await eventually(
    async () => expect((await client(cutOff.url, revokedAfter.key).get('/applications/key')).status).toBe(401),
    1_000,
  );
  console.log(
    `after the gap: revoked-in-gap key refused ${refusedAfterMs} ms after the relay came back; a later revocation seen in ${Date.now() - deletedAt} ms`,
  );
}, 60_000);

test('while its watch is down a cache keeps nothing: reads made in the gap see changes made in the gap', async () => {
  // The watch goes through the relay, the reads straight to etcd: a cluster member the watch's connection lost but
  // whose peers still answer reads.
  const watched = openStore({ kind: 'etcd', endpoints: [`http://127.0.0.1:${relay.port}`] });
  const reads = openStore({ kind: 'etcd', endpoints: [etcd.endpoint] });
  const cache = new WatchedCache<string>(watched, '/gap-test/', { max: 100, ttlSeconds: 300 });
  try {
    await cache.start();
    await reads.put('/gap-test/a', 'before');
    const load = async () => (await reads.get('/gap-test/a'))?.value;
    expect(await cache.get('a', load)).toBe('before');

    await relay.cut();
    await sleep(300); // the watch notices the broken connection
    for (const value of ['in the gap', 'later in the gap', 'still in the gap']) {
      await reads.put('/gap-test/a', value);
      expect(await cache.get('a', load)).toBe(value);
    }
    await relay.restore();
    // Back: cached again, and evicted by the watch's events.
    await eventually(async () => {
      await reads.put('/gap-test/a', 'back');
      expect(await cache.get('a', load)).toBe('back');
    }, 10_000);
  } finally {
    await relay.restore();
    await cache.stop();
    await Promise.all([watched.close(), reads.close()]);
  }
}, 30_000);
