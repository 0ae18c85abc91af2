// Token search latency on a tenant of BENCH_SEARCH_TOKENS tokens (default 100,000), against GET /tokens/{id} of the
// same tenant as the anchor.
//
// Set-up is bounded in time: this process builds each token record as TokenService.create does (data sealed, search
// index outputs hashed, under the same KEK as the API child process, so the API reads and searches them as its own)
// and writes 16 tokens with their search index entries per etcd transaction; one more token goes through
// TokenService.create itself. (Through the API or one create per token, 100k tokens take many minutes here.) Then one client at a time
// (latency, not throughput) sends, through keep-alive HTTP to the API:
//   - GET /tokens/{id} of a random token (the anchor);
//   - POST /v2/tokens/search `data:<one token's value>`: an equality on a keyed-hash index (1 match);
//   - POST /v2/tokens/search `type:token AND metadata.group:<g>`: every token is of type token (far over
//     TOKENVAULT_SEARCH_MAX_MATCHES), the group has BENCH_SEARCH_TOKENS / 1000 members; page size 20;
//   - POST /tokens/search (v1) of the same AND: every match counted for total_items.
// Each is measured BENCH_SEARCH_REQUESTS times (default 500) after 50 unmeasured; the report gives p50 and p99 and
// their ratio to the anchor.
import { randomBytes, randomInt, randomUUID } from 'node:crypto';
import type { TenantPrincipal } from '../src/auth/principal.js';
import type { AccessRule } from '../src/auth/access/rules.js';
import { KeyRing } from '../src/crypto/keyring.js';
import { TenantCrypto } from '../src/crypto/envelope.js';
import { TenantDirectory } from '../src/domain/tenants/directory.js';
import { seal, type DataCipher, type TokenRecord } from '../src/domain/tokens/records.js';
import { searchHashes, searchIndexOps } from '../src/domain/tokens/search-index.js';
import { TokenService } from '../src/domain/tokens/service.js';
import { encode } from '../src/store/codec.js';
import { keys } from '../src/store/keys.js';
import type { TxnOp } from '../src/store/store.js';
import { UsageService } from '../src/domain/usage/service.js';
import { createLogger } from '../src/observability/logger.js';
import { EtcdStore } from '../src/store/etcd.js';
import { apiPool, createTenantWithApplication, send } from './support/api-client.js';
import { spawnApi, startBenchEtcd } from './support/processes.js';
import { formatCount, formatMs, formatRatio, heading, table } from './support/report.js';
import { wholeNumberSetting, type Benchmark, type Settings } from './support/settings.js';

const RULES = [
  {
    description: 'all',
    priority: 1,
    container: '/',
    transform: 'reveal',
    permissions: ['token:create', 'token:read', 'token:search'],
  },
];

export const searchBenchmark: Benchmark = {
  name: 'search',
  description: 'POST /tokens/search on 100k tokens (equality, AND) vs GET /tokens/{id}: p50/p99 and ratio',
  run,
};

/** Tokens per set-up transaction: each is 6 operations (record; type, container, 2 metadata and data entries), under etcd's 128. */
const BATCH = 16;

/**
 * The record TokenService.create writes for such a token, built here so many go into one transaction: sealed data
 * and search hashes as the service makes them (no fingerprint: it is not searched here).
 */
async function benchRecord(cipher: DataCipher, tenantId: string, id: string, i: number): Promise<TokenRecord> {
  const data = valueOf(i);
  const search_indexes = ['{{ data }}'];
  return {
    id,
    tenant_id: tenantId,
    type: 'token',
    containers: ['/general/high/'],
    metadata: { customer: `c${i}`, group: groupOf(i) },
    search_indexes,
    search_hashes: await searchHashes(cipher, tenantId, search_indexes, data),
    created_at: new Date().toISOString(),
    created_by: 'bench',
    sealed: await seal(cipher, tenantId, id, { d: data }),
  };
}

const valueOf = (i: number) => `customer-${i}@example.com`;
const groupOf = (i: number) => `g${i % 1000}`;

async function run(settings: Settings): Promise<void> {
  const total = wholeNumberSetting('BENCH_SEARCH_TOKENS', 100_000, 1_000, 1_000_000);
  const requests = wholeNumberSetting('BENCH_SEARCH_REQUESTS', 500, 10, 100_000);
  const progress = (line: string) => process.stderr.write(`${line}\n`);
  progress('search: starting etcd and the API');
  const etcd = await startBenchEtcd();
  const kek = randomBytes(32);
  const api = await spawnApi({
    storeUrl: etcd.storeUrl,
    logLevel: settings.apiLogLevel,
    env: { TOKENVAULT_KEK: kek.toString('base64') },
  }).catch(async (error: unknown) => {
    await etcd.stop();
    throw error;
  });
  const store = new EtcdStore({ endpoints: [etcd.endpoint] });
  const pool = apiPool(api.url, 1);
  try {
    const tenant = await createTenantWithApplication(api.url, api.operatorKey, RULES);
    const cipher = new TenantCrypto(store, new KeyRing([kek]), createLogger('silent'));
    const tokens = new TokenService(store, cipher, new TenantDirectory(store, 60), new UsageService(store));
    const loader: TenantPrincipal = {
      kind: 'application',
      tenantId: tenant.tenantId,
      applicationId: '00000000-0000-4000-8000-00000000be4c',
      applicationType: 'private',
      permissions: new Set(['token:create']),
      rules: [],
    };

    const started = Date.now();
    const ids: string[] = Array.from({ length: total }, () => randomUUID());
    let next = 0;
    const writers = Array.from({ length: Math.max(4, Math.min(16, settings.concurrency)) }, async () => {
      for (let first = next; first < total; first = next) {
        const end = Math.min(total, first + BATCH);
        next = end;
        const ops: TxnOp[] = [];
        for (let i = first; i < end; i++) {
          const record = await benchRecord(cipher, tenant.tenantId, ids[i], i);
          ops.push(...searchIndexOps(undefined, record), {
            type: 'put',
            key: keys.token(tenant.tenantId, record.id),
            value: encode('token', record),
          });
        }
        await store.txn({ success: ops });
        if (Math.floor(end / 10_000) > Math.floor(first / 10_000))
          progress(`search: ~${formatCount(end)} tokens written`);
      }
    });
    await Promise.all(writers);
    // The service's own create path, for one token: what a search must find next to the batch-written ones.
    const viaService = await tokens.create(loader, {
      type: 'token',
      data: valueOf(total),
      search_indexes: ['{{ data }}'],
      metadata: { customer: `c${total}`, group: groupOf(total) },
    });
    const check = await tokens.get({ ...loader, rules: RULES as AccessRule[] }, ids[total - 1]);
    if (check.data !== valueOf(total - 1) || !viaService.id) throw new Error('set-up wrote unreadable tokens');
    const setupSeconds = (Date.now() - started) / 1000;
    progress(`search: ${formatCount(total + 1)} tokens in ${setupSeconds.toFixed(0)} s; measuring`);

    const scenarios: Array<[string, () => { method: 'GET' | 'POST'; path: string; body?: string }]> = [
      ['GET /tokens/{id} (anchor)', () => ({ method: 'GET', path: `/tokens/${ids[randomInt(total)]}` })],
      [
        'v2 search data:<value> (1 match)',
        () => ({
          method: 'POST',
          path: '/v2/tokens/search',
          body: JSON.stringify({ query: `data:${valueOf(randomInt(total))}`, size: 20 }),
        }),
      ],
      [
        `v2 search type:token AND metadata.group:<g> (${formatCount(total / 1000)} matches, page of 20)`,
        () => ({
          method: 'POST',
          path: '/v2/tokens/search',
          body: JSON.stringify({ query: `type:token AND metadata.group:${groupOf(randomInt(total))}`, size: 20 }),
        }),
      ],
      [
        'v1 search, same AND (counts every match)',
        () => ({
          method: 'POST',
          path: '/tokens/search',
          body: JSON.stringify({
            query: `type:token AND metadata.group:${groupOf(randomInt(total))}`,
            page: 1,
            size: 20,
          }),
        }),
      ],
    ];

    const results: Array<{ name: string; p50: number; p99: number }> = [];
    for (const [name, make] of scenarios) {
      const samples: number[] = [];
      for (let n = 0; n < requests + 50; n++) {
        const request = make();
        const t0 = process.hrtime.bigint();
        const answer = await send(pool, { ...request, key: tenant.key }, 200);
        const ms = Number(process.hrtime.bigint() - t0) / 1e6;
        if (n >= 50) samples.push(ms);
        if (request.method === 'POST' && n === 0 && !answer.includes('"data":[{'))
          throw new Error(`${name}: found nothing: ${answer.slice(0, 200)}`);
      }
      samples.sort((a, b) => a - b);
      const pct = (p: number) => samples[Math.min(samples.length - 1, Math.floor((p / 100) * samples.length))];
      results.push({ name, p50: pct(50), p99: pct(99) });
      progress(`search: ${name} done`);
    }
    const anchor = results[0];
    process.stdout.write(
      `${heading(`search: ${formatCount(total)} tokens in one tenant, one client, ${formatCount(requests)} requests each`)}\n` +
        `set-up: ${formatCount(total)} token records and their search index entries written ${BATCH} to a transaction, one more through TokenService.create, in ${setupSeconds.toFixed(0)} s\n\n` +
        table(
          ['request', 'p50 ms', 'p99 ms', 'p50 / anchor', 'p99 / anchor'],
          results.map((r) => [
            r.name,
            formatMs(r.p50),
            formatMs(r.p99),
            formatRatio(r.p50 / anchor.p50),
            formatRatio(r.p99 / anchor.p99),
          ]),
        ) +
        '\n',
    );
  } finally {
    await pool.close();
    await store.close();
    await api.stop();
    await etcd.stop();
  }
}
