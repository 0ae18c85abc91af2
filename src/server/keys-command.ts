// `tokenvault keys rotate`: the command around the re-wrapping of every tenant's data keys (src/crypto/rotate.ts), with
// its configuration, store and exit code.
import { loadConfig } from '../config/config.js';
import { KeyRing } from '../crypto/keyring.js';
import { rotateKeks } from '../crypto/rotate.js';
import { createLogger } from '../observability/logger.js';
import { besideProgress, Progress } from '../observability/progress.js';
import { keys } from '../store/keys.js';
import { openCommandStore } from '../store/open.js';

/** `tokenvault keys <subcommand>`: the exit code. */
export async function keysCommand(argv: string[]): Promise<number> {
  const [subcommand, ...rest] = argv;
  if (subcommand !== 'rotate') {
    process.stderr.write(
      'usage: tokenvault keys rotate --store etcd://host:port|postgres://user@host:port/database (with TOKENVAULT_KEK_FILE or TOKENVAULT_KEK: new key first, then the old ones)\n',
    );
    return 2;
  }
  const config = loadConfig({ argv: rest });
  if (config.keyEncryptionKeys === undefined) {
    process.stderr.write(
      'tokenvault keys rotate: no key-encryption key configured; set TOKENVAULT_KEK_FILE (or --kek-file, TOKENVAULT_KEK) to the new key followed by the old ones\n',
    );
    return 1;
  }
  // The memory store would be a new, empty one: only the api's own store (etcd or PostgreSQL) has anything to work on.
  if (config.store.kind === 'memory') {
    process.stderr.write(
      'tokenvault keys rotate: needs the store the api uses (--store etcd://host:port or postgres://user@host:port/database)\n',
    );
    return 1;
  }
  const ring = new KeyRing(config.keyEncryptionKeys);
  // Logs go to stderr so stdout carries only the summary.
  let progress: Progress | undefined;
  const logger = createLogger(
    config.logLevel,
    besideProgress(() => progress),
  );
  const store = openCommandStore(config.store);
  try {
    // Standard error, like the logs: stdout carries only the summary.
    progress = new Progress({ label: 'keys rotate', unit: 'tenants', total: await store.count(keys.tenants) });
    let result;
    try {
      result = await rotateKeks(store, ring, logger, () => progress!.add());
    } finally {
      progress.stop();
      progress = undefined;
    }
    process.stdout.write(
      `keys rotate: primary KEK ${ring.primaryId}; ${result.tenants} tenants checked, ${result.rewrapped} keys re-wrapped, ${result.failed} tenants failed\n`,
    );
    if (result.failed > 0) {
      process.stderr.write(
        'tokenvault keys rotate: some tenants have keys no configured KEK opens (see the log); add the KEK they were wrapped with after the new one and run again\n',
      );
      return 1;
    }
    return 0;
  } finally {
    await store.close();
  }
}
