// `tokenvault audit verify [--tenant <id>]`: walks each tenant's audit chains in etcd (one per lane, src/audit/verify.ts)
// and reports the first broken link. Exit 0: every chain intact; 1: a link is broken (or the store could not be read); 2: usage.
import { parseArgs } from 'node:util';
import { verifyChain } from '../audit/verify.js';
import { loadConfig } from '../config/config.js';
import { Progress } from '../observability/progress.js';
import { keys } from '../store/keys.js';
import { openCommandStore } from '../store/open.js';
import { forEachTenantId } from '../store/records.js';

const USAGE =
  'usage: tokenvault audit verify [--tenant <tenant id>] --store etcd://host:port|postgres://user@host:port/database';

export async function auditCommand(argv: string[]): Promise<number> {
  const [subcommand, ...rest] = argv;
  if (subcommand !== 'verify') {
    process.stderr.write(`${USAGE}\n`);
    return 2;
  }
  let tenant: string | undefined;
  const others: string[] = [];
  try {
    // --tenant is this command's own; everything else is the usual configuration (--store, ...).
    const parsed = parseArgs({ args: rest, options: { tenant: { type: 'string' } }, strict: false, tokens: true });
    tenant = typeof parsed.values.tenant === 'string' ? parsed.values.tenant : undefined;
    for (const token of parsed.tokens ?? []) {
      if (token.kind === 'option' && token.name === 'tenant') continue;
      if (token.kind === 'option') others.push(token.rawName, ...(token.value !== undefined ? [token.value] : []));
      else if (token.kind === 'positional') others.push(token.value);
    }
  } catch (error) {
    process.stderr.write(`tokenvault audit verify: ${(error as Error).message}\n${USAGE}\n`);
    return 2;
  }
  if (tenant !== undefined && !/^[0-9a-f-]{36}$/i.test(tenant)) {
    process.stderr.write(`tokenvault audit verify: --tenant must be a tenant id (UUID)\n${USAGE}\n`);
    return 2;
  }
  const config = loadConfig({ argv: others });
  // The memory store would be a new, empty one: only the api's own store (etcd or PostgreSQL) has anything to work on.
  if (config.store.kind === 'memory') {
    process.stderr.write(
      'tokenvault audit verify: needs the store the api uses (--store etcd://host:port or postgres://user@host:port/database)\n',
    );
    return 1;
  }
  const store = openCommandStore(config.store);
  try {
    // The tenants a page at a time, twice: counted first (the progress line's total), then walked.
    const eachTenant = (each: (ids: string[]) => Promise<void>) =>
      tenant !== undefined ? each([tenant.toLowerCase()]) : forEachTenantId(store, each);
    let total = 0;
    await eachTenant(async (ids) => {
      for (const count of await Promise.all(ids.map((id) => store.count(keys.auditLog(id))))) total += count;
    });
    const progress = new Progress({ label: 'audit verify', unit: 'entries', total });
    let tenants = 0;
    let broken = 0;
    try {
      await eachTenant(async (ids) => {
        for (const id of ids) {
          tenants++;
          const verdict = await verifyChain(store, id, (count) => progress.add(count));
          progress.clear();
          if (verdict.breaks.length === 0) {
            process.stdout.write(
              `audit verify: tenant ${id}: ${verdict.entries} entries in ${verdict.lanes} lanes, chain intact\n`,
            );
            continue;
          }
          broken++;
          const first = verdict.breaks[0];
          process.stdout.write(
            `audit verify: tenant ${id}: ${verdict.entries} entries in ${verdict.lanes} lanes, BROKEN at seq ${first.seq}` +
              ` of lane '${first.lane}' (${first.key}): ${first.reason}` +
              (verdict.breakCount > 1 ? `; ${verdict.breakCount - 1} more broken links after it` : '') +
              '\n',
          );
        }
      });
    } finally {
      progress.stop();
    }
    process.stdout.write(`audit verify: ${tenants} tenants checked, ${broken} with a broken chain\n`);
    return broken > 0 ? 1 : 0;
  } finally {
    await store.close();
  }
}
