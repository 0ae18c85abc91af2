// `tokenvault search reindex`: writes the search index entries of every stored token (src/domain/tokens/
// search-reindex.ts), for tokens written before token search existed. Safe while the API runs, and to run again.
import { loadConfig } from '../config/config.js';
import { TenantCrypto } from '../crypto/envelope.js';
import { KeyRing } from '../crypto/keyring.js';
import { countTokens, reindexTokens } from '../domain/tokens/search-reindex.js';
import { createLogger } from '../observability/logger.js';
import { besideProgress, Progress } from '../observability/progress.js';
import { openCommandStore } from '../store/open.js';

/** `tokenvault search <subcommand>`: the exit code. */
export async function searchCommand(argv: string[]): Promise<number> {
  const [subcommand, ...rest] = argv;
  if (subcommand !== 'reindex') {
    process.stderr.write(
      "usage: tokenvault search reindex --store etcd://host:port|postgres://user@host:port/database (with the API's TOKENVAULT_KEK_FILE or TOKENVAULT_KEK)\n",
    );
    return 2;
  }
  const config = loadConfig({ argv: rest });
  if (config.keyEncryptionKeys === undefined) {
    process.stderr.write(
      'tokenvault search reindex: reading token data needs the key-encryption key (TOKENVAULT_KEK_FILE, --kek-file or TOKENVAULT_KEK)\n',
    );
    return 1;
  }
  // The memory store would be a new, empty one: only the api's own store (etcd or PostgreSQL) has anything to work on.
  if (config.store.kind === 'memory') {
    process.stderr.write(
      'tokenvault search reindex: needs the store the api uses (--store etcd://host:port or postgres://user@host:port/database)\n',
    );
    return 1;
  }
  // Logs go to stderr so stdout carries only the summary.
  let progress: Progress | undefined;
  const logger = createLogger(
    config.logLevel,
    besideProgress(() => progress),
  );
  const store = openCommandStore(config.store);
  try {
    progress = new Progress({ label: 'search reindex', unit: 'tokens', total: await countTokens(store) });
    let result;
    try {
      const cipher = new TenantCrypto(store, new KeyRing(config.keyEncryptionKeys), logger);
      result = await reindexTokens(store, cipher, undefined, () => progress!.add());
    } finally {
      progress.stop();
      progress = undefined;
    }
    process.stdout.write(
      `search reindex: ${result.tenants} tenants, ${result.tokens} tokens reindexed, ${result.skipped} changed meanwhile (indexed by their own write)\n`,
    );
    return 0;
  } finally {
    await store.close();
  }
}
