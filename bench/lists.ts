// List pages of a tenant with many reactors: GET /reactors page 1, the middle and the last page, and what one tenant
// paging its list does to another tenant's requests.
//
// Set-up is bounded in time: BENCH_LIST_REACTORS reactors (default 10,000, as the controller benchmark creates in one
// tenant), each with 2 KB of inline code, are written by this process straight into etcd, 16 to a transaction, as
// ReactorService.create stores them (configuration sealed under the API's KEK) but without anything else a create
// writes (formula references, creation-order entries): the data of a vault from before the creation-order index. The
// first list answers from every record and files them (timed once, "first list"); then, one client at a time:
//   - GET /reactors?page=1&size=20, the page just past the middle (the most index keys a page reads), and the last;
//   - GET /reactors?name=… matching one reactor: a name filter reads every record of the kind, so this is what
//     TOKENVAULT_REACTORS_PER_TENANT bounds (run with BENCH_LIST_REACTORS=1000 for the default limit);
//   - GET /applications/key of another tenant (one cached key lookup and one etcd get), alone and while the loaded
//     tenant asks for page 1 of its list PAGES_PER_SECOND times a second (a fixed rate, not as fast as it answers:
//     the same demand before and after a change).
// Each runs BENCH_SECONDS per round (after BENCH_WARMUP_SECONDS unmeasured), BENCH_ROUNDS rounds; the report gives the
// median of the rounds: requests per second, p50, p99, and the API's and etcd's CPU per request. With --profile, where
// the API's time went while it answered page 1.
import { randomBytes, randomUUID } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { TenantCrypto } from '../src/crypto/envelope.js';
import { KeyRing } from '../src/crypto/keyring.js';
import { createLogger } from '../src/observability/logger.js';
import { encode } from '../src/store/codec.js';
import { EtcdStore } from '../src/store/etcd.js';
import { keys } from '../src/store/keys.js';
import type { TxnOp } from '../src/store/store.js';
import { apiPool, createTenantWithApplication, send, type Sent } from './support/api-client.js';
import { runLoad, type LoadResult } from './support/load.js';
import { repoRoot } from '../test/support/repo-root.js';
import { spawnApi, startBenchEtcd } from './support/processes.js';
import { summarizeProfile } from './support/profile.js';
import { formatCount, formatMs, heading, median, table } from './support/report.js';
import { wholeNumberSetting, type Benchmark, type Settings } from './support/settings.js';

export const listsBenchmark: Benchmark = {
  name: 'lists',
  description: "GET /reactors page 1, middle and last with 10,000 reactors in a tenant; another tenant's p50 meanwhile",
  run,
};

const BATCH = 16;
const PAGE_SIZE = 20;
/** Pages a second the loaded tenant asks for while another tenant is measured. */
const PAGES_PER_SECOND = 2;
const CODE = `module.exports = async function () { return { raw: {} }; };\n/*${'x'.repeat(2000)}*/\n`;

/** Calls `request` `perSecond` times a second, without waiting for answers, until `stop`; resolves when all answered. */
async function pace(perSecond: number, stop: () => boolean, request: () => Promise<unknown>): Promise<void> {
  const sent: Promise<unknown>[] = [];
  while (!stop()) {
    sent.push(request());
    await new Promise((resolve) => setTimeout(resolve, 1000 / perSecond));
  }
  await Promise.all(sent);
}

async function run(settings: Settings): Promise<void> {
  const total = wholeNumberSetting('BENCH_LIST_REACTORS', 10_000, 100, 100_000);
  const progress = (line: string) => process.stderr.write(`${line}\n`);
  progress('lists: starting etcd and the API');
  const etcd = await startBenchEtcd();
  const kek = randomBytes(32);
  const profileDir = settings.profile ? await mkdtemp(path.join(os.tmpdir(), 'tokenvault-bench-prof-')) : undefined;
  const api = await spawnApi({
    storeUrl: etcd.storeUrl,
    logLevel: settings.apiLogLevel,
    cpuProfileDir: profileDir,
    env: { TOKENVAULT_KEK: kek.toString('base64') },
  }).catch(async (error: unknown) => {
    await etcd.stop();
    throw error;
  });
  const store = new EtcdStore({ endpoints: [etcd.endpoint] });
  const pools = [apiPool(api.url, 1), apiPool(api.url, 4)];
  try {
    const loaded = await createTenantWithApplication(api.url, api.operatorKey, []);
    const other = await createTenantWithApplication(api.url, api.operatorKey, []);
    const cipher = new TenantCrypto(store, new KeyRing([kek]), createLogger('silent'));
    const tenantId = loaded.tenantId;
    const started = Date.now();
    for (let first = 0; first < total; first += BATCH) {
      const ops: TxnOp[] = [];
      for (let i = first; i < Math.min(total, first + BATCH); i++) {
        const id = randomUUID();
        const record = {
          id,
          tenant_id: tenantId,
          name: `reactor ${i}`,
          code: CODE,
          sealed_configuration: await cipher.encrypt(tenantId, `reactor:${tenantId}:${id}`, '{}'),
          created_at: new Date().toISOString(),
          created_by: 'bench',
        };
        ops.push({ type: 'put', key: keys.reactor(tenantId, id), value: encode('reactor', record) });
      }
      await store.txn({ success: ops });
    }
    progress(`lists: ${formatCount(total)} reactors written in ${((Date.now() - started) / 1000).toFixed(0)} s`);

    const lastPage = Math.ceil(total / PAGE_SIZE);
    // Just past the middle: read back from the index's end, about the most index keys a page reads.
    const middlePage = Math.floor(lastPage / 2) + 1;
    const page = (n: number): Sent => ({
      method: 'GET',
      path: `/reactors?page=${n}&size=${PAGE_SIZE}`,
      key: loaded.managementKey,
    });
    const once = async (sent: Sent) => {
      const t0 = performance.now();
      const body = await send(pools[0], sent, 200);
      if (!body.includes(`"total_items":${total}`)) throw new Error(`unexpected list: ${body.slice(0, 200)}`);
      return performance.now() - t0;
    };
    const firstList = await once(page(1));
    const secondList = await once(page(1));

    const processes = { api: api.pid, etcd: etcd.pid };
    const measure = async (subject: Sent, background?: Sent): Promise<LoadResult> => {
      const load = async (seconds: number) => {
        let stopping = false;
        const paced =
          background &&
          pace(
            PAGES_PER_SECOND,
            () => stopping,
            () => send(pools[1], background, 200),
          );
        const result = await runLoad(() => send(pools[0], subject, 200).then(() => undefined), {
          concurrency: 1,
          seconds,
          maxOps: settings.maxOps,
          processes,
        });
        stopping = true;
        await paced;
        return result;
      };
      if (settings.warmupSeconds > 0) await load(settings.warmupSeconds);
      const result = await load(settings.seconds);
      if (result.errors > 0) throw new Error(`${subject.path}: ${result.firstError}`);
      return result;
    };
    const named: Sent = {
      method: 'GET',
      path: `/reactors?name=${encodeURIComponent(`reactor ${total - 1}`)}&size=${PAGE_SIZE}`,
      key: loaded.managementKey,
    };
    const key: Sent = { method: 'GET', path: '/applications/key', key: other.key };
    const scenarios: Array<[string, () => Promise<LoadResult>]> = [
      [`GET /reactors page 1 (size ${PAGE_SIZE})`, () => measure(page(1))],
      [`GET /reactors page ${middlePage} (just past the middle)`, () => measure(page(middlePage))],
      [`GET /reactors page ${lastPage} (last)`, () => measure(page(lastPage))],
      [`GET /reactors?name= (reads all ${formatCount(total)})`, () => measure(named)],
      ['other tenant GET /applications/key, alone', () => measure(key)],
      [`other tenant GET /applications/key, ${PAGES_PER_SECOND} pages/s listed`, () => measure(key, page(1))],
    ];
    const rows: string[][] = [];
    const measured: LoadResult[][] = [];
    for (const [name, scenario] of scenarios) {
      const rounds: LoadResult[] = [];
      for (let round = 0; round < settings.rounds; round++) rounds.push(await scenario());
      measured.push(rounds);
      const m = (pick: (r: LoadResult) => number) => median(rounds.map(pick));
      rows.push([
        name,
        formatCount(m((r) => r.opsPerSecond)),
        formatMs(m((r) => r.p50Ms)),
        formatMs(m((r) => r.p99Ms)),
        formatCount(m((r) => ((r.cores.api ?? NaN) * r.seconds * 1e6) / r.ops)),
        formatCount(m((r) => ((r.cores.etcd ?? NaN) * r.seconds * 1e6) / r.ops)),
        m((r) => r.cores.other ?? NaN).toFixed(2),
      ]);
      progress(`lists: ${name} done`);
    }
    process.stdout.write(
      `${heading(`${formatCount(total)} reactors (2 KB of code each) in one tenant, one client`)}\n` +
        `first list after set-up ${formatMs(firstList)} ms, the next ${formatMs(secondList)} ms\n\n` +
        table(['request', 'per s', 'p50 ms', 'p99 ms', 'API CPU µs/req', 'etcd CPU µs/req', 'other cores'], rows) +
        '\n',
    );
    const profile = await api.stop();
    if (profile) {
      const [pageOne] = measured;
      process.stdout.write(
        `${heading('Where the API spends its time answering page 1 (CPU profile, measured windows only)')}\n` +
          summarizeProfile(profile, repoRoot, 'API GET /reactors page 1', pageOne, {
            cpuUsPerRequest: median(pageOne.map((r) => ((r.cores.api ?? NaN) * r.seconds * 1e6) / r.ops)),
          }) +
          '\n',
      );
    }
  } finally {
    await Promise.all(pools.map((pool) => pool.close()));
    await store.close();
    await api.stop();
    await etcd.stop();
    if (profileDir) await rm(profileDir, { recursive: true, force: true });
  }
}
