// `tokenvault backup` and `tokenvault restore`: a logical export of the vault's keys (src/store/keyspace.ts, etcd or
// PostgreSQL) into a checksummed file (src/store/backup-file.ts), and its import into an empty store of either kind. The key-encryption keys go
// to a separate file, never into the backup: the backup alone is ciphertext nobody can read. Why logical rather than
// an etcd snapshot: docs/operations.md, "Backup and restore".
import { createHash } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { pipeline } from 'node:stream/promises';
import { loadConfig, type Config } from '../config/config.js';
import { kekId } from '../crypto/keyring.js';
import { parseTenantCryptoRecord } from '../crypto/tenant-keys.js';
import { Progress } from '../observability/progress.js';
import { BackupFileError, BackupWriter, readBackup } from '../store/backup-file.js';
import type { Keyspace, KeyValue } from '../store/keyspace.js';
import { keys } from '../store/keys.js';
import { openKeyspace, openCommandStore } from '../store/open.js';

const BACKUP_USAGE =
  'usage: tokenvault backup --out FILE|- [--keys-out FILE] --store etcd://host:port|postgres://user@host:port/db (TOKENVAULT_KEK_FILE: the keys to copy to --keys-out)';
const RESTORE_USAGE =
  'usage: tokenvault restore --from FILE|- [--force] --store etcd://host:port|postgres://user@host:port/db (TOKENVAULT_KEK_FILE, optional: the key file, checked against the backup)';

/** `/tokenvault/t/<tenant>/crypto`: the record of a tenant's wrapped keys, which names the KEKs it needs. */
const CRYPTO_KEY = new RegExp(`^${keys.root}t/[^/]+/crypto$`);

/** `tokenvault backup`: the exit code. */
export async function backupCommand(argv: string[]): Promise<number> {
  const own = takeFlags(argv, ['out', 'keys-out'], []);
  if (typeof own === 'string' || own.values.out === undefined) return usage('backup', own, BACKUP_USAGE);
  // `--out -`: the backup goes to standard output (kubectl exec … > file), and what is said goes to standard error.
  const toStdout = own.values.out === '-';
  const out = toStdout ? 'standard output' : path.resolve(own.values.out);
  const say = toStdout ? process.stderr : process.stdout;
  const keysOut = own.values['keys-out'] === undefined ? undefined : path.resolve(own.values['keys-out']);
  if (keysOut === out) {
    process.stderr.write(
      'tokenvault backup: --keys-out must be another file than --out (the keys never go with the data)\n',
    );
    return 2;
  }
  const config = loadConfig({ argv: own.rest });
  const keyspace = keyspaceOf(config, 'backup');
  if (!keyspace) return 1;
  if (keysOut !== undefined && config.keyEncryptionKeys === undefined) {
    process.stderr.write(
      'tokenvault backup: --keys-out needs the keys: set TOKENVAULT_KEK_FILE (or --kek-file, TOKENVAULT_KEK)\n',
    );
    await keyspace.close();
    return 1;
  }

  const started = Date.now();
  // The count includes leased keys, which the export leaves out: the line ends a little short of its total.
  const progress = new Progress({ label: 'backup', unit: 'keys', total: await countKeys(config) });
  const writer = new BackupWriter(toStdout ? process.stdout : out);
  // Ctrl-C or SIGTERM: the partial file goes (it is never renamed into place anyway), and the exit says why.
  const stop = (signal: NodeJS.Signals) => {
    progress.stop();
    void writer.abort().finally(() => process.exit(signal === 'SIGINT' ? 130 : 143));
  };
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
  const kekIds = new Set<string>();
  const unreadable: string[] = [];
  let skipped = 0;
  try {
    await writer.header({ created_at: new Date().toISOString(), prefix: keys.root });
    const result = await keyspace.export(keys.root, async (entry) => {
      progress.add();
      const key = entry.key.toString('utf8');
      // A restore's own marker (left by an interrupted one) is not the vault's data.
      if (key === keys.restoreInProgress) {
        skipped++;
        return;
      }
      if (CRYPTO_KEY.test(key)) {
        try {
          const record = parseTenantCryptoRecord(entry.value.toString('utf8'));
          for (const wrapped of [...Object.values(record.data_keys), record.fingerprint_key]) {
            kekIds.add(wrapped.kek_id);
          }
        } catch {
          // Backed up as it is (the API reports it as TV_DECRYPTION_FAILED too); it just names no KEK.
          unreadable.push(key);
        }
      }
      await writer.entry(entry);
    });
    progress.stop();
    const bytes = await writer.finish({
      keys: result.keys - skipped,
      leased_skipped: result.leased,
      etcd_revision: result.revision,
      kek_ids: [...kekIds].sort(),
    });
    say.write(
      `backup: ${result.keys - skipped} keys at store revision ${result.revision} (${result.leased} leased keys left out) in ${out}, ${bytes} bytes, ${Date.now() - started} ms\n`,
    );
  } catch (error) {
    progress.stop();
    await writer.abort();
    throw error;
  } finally {
    process.off('SIGINT', stop);
    process.off('SIGTERM', stop);
    await keyspace.close();
  }

  if (unreadable.length > 0) {
    process.stderr.write(
      `tokenvault backup: ${unreadable.length} tenant key records are not valid (backed up as they are, but no KEK opens them): ${unreadable.slice(0, 5).join(', ')}\n`,
    );
  }
  if (keysOut === undefined) {
    process.stderr.write(
      `tokenvault backup: no --keys-out: the backup is readable only with the key-encryption keys ${[...kekIds].sort().join(', ') || '(none yet)'}; back them up apart from it\n`,
    );
    return 0;
  }
  const ring = config.keyEncryptionKeys!;
  // The same format as TOKENVAULT_KEK_FILE (primary first), so the restored API reads it as is.
  // A new file, so the mode applies (an existing file would keep its own).
  await rm(keysOut, { force: true });
  await writeFile(keysOut, `${ring.map((key) => key.toString('base64')).join('\n')}\n`, { mode: 0o600, flag: 'wx' });
  say.write(`backup: ${ring.length} key-encryption keys in ${keysOut} (keep it apart from the backup)\n`);
  const missing = missingKeks(kekIds, ring);
  if (missing.length > 0) {
    process.stderr.write(
      `tokenvault backup: the backup needs key-encryption keys that are not configured: ${missing.join(', ')}; add them to TOKENVAULT_KEK_FILE and back up again\n`,
    );
    return 1;
  }
  return 0;
}

/** `tokenvault restore`: the exit code. */
export async function restoreCommand(argv: string[]): Promise<number> {
  const own = takeFlags(argv, ['from'], ['force']);
  if (typeof own === 'string' || own.values.from === undefined) return usage('restore', own, RESTORE_USAGE);
  const force = own.flags.has('force');
  const config = loadConfig({ argv: own.rest });
  if (own.values.from !== '-') return restoreFile(path.resolve(own.values.from), config, force);
  // `--from -` (kubectl exec -i … < file): the file is read twice (checked through, then written), so standard
  // input goes to a private temporary file first.
  const dir = await mkdtemp(path.join(os.tmpdir(), 'tokenvault-restore-'));
  try {
    const spooled = path.join(dir, 'backup');
    await pipeline(process.stdin, createWriteStream(spooled, { mode: 0o600 }));
    return await restoreFile(spooled, config, force);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

async function restoreFile(from: string, config: Config, force: boolean): Promise<number> {
  const started = Date.now();
  // The whole file is checked before the store is touched: a damaged backup changes nothing. The digest of its entries
  // (keys and values, in order) is what the store is compared with when it already holds keys.
  let checked;
  const digest = entryDigest();
  const checking = new Progress({ label: 'restore (checking the file)', unit: 'keys' });
  try {
    checked = await readBackup(from, (entry) => {
      checking.add();
      digest.add(entry);
    });
  } catch (error) {
    if (error instanceof BackupFileError) {
      process.stderr.write(`tokenvault restore: ${error.message}; nothing was restored\n`);
      return 1;
    }
    throw error;
  } finally {
    checking.stop();
  }
  const { trailer, sha256 } = checked;
  if (config.keyEncryptionKeys !== undefined) {
    const missing = missingKeks(new Set(trailer.kek_ids), config.keyEncryptionKeys);
    if (missing.length > 0) {
      process.stderr.write(
        `tokenvault restore: the configured keys do not include ${missing.join(', ')}, which the backup's data needs (wrong key file?); nothing was restored\n`,
      );
      return 1;
    }
  } else if (trailer.kek_ids.length > 0) {
    process.stderr.write(
      `tokenvault restore: no key file given (TOKENVAULT_KEK_FILE), so it was not checked; the API needs the key-encryption keys ${trailer.kek_ids.join(', ')} to read the restored data\n`,
    );
  }

  const keyspace = keyspaceOf(config, 'restore');
  if (!keyspace) return 1;
  const store = openCommandStore(config.store);
  try {
    const marker = await store.get(keys.restoreInProgress);
    // A restore of this very backup was interrupted: writing it again finishes it (every key it wrote is one of the
    // backup's, written again with the same value), so that needs no --force.
    const resuming = marker !== undefined && markerBackup(marker.value) === sha256;
    const present = (await keyspace.countUnleased(keys.root)) - (marker ? 1 : 0);
    if (present > 0 && !force && !resuming) {
      // Run twice: the store holds exactly this backup already (and nothing since), which is what the restore would make.
      if (!marker && present === trailer.keys && (await storeDigest(keyspace)) === digest.hex()) {
        process.stdout.write(
          `restore: the store already holds exactly the ${trailer.keys} keys of ${from}; nothing to do, ${Date.now() - started} ms\n`,
        );
        return 0;
      }
      process.stderr.write(
        marker
          ? `tokenvault restore: the store holds part of an interrupted restore of another backup (${present} keys); restore that backup again to finish it, or pass --force to delete them first; nothing was restored\n`
          : `tokenvault restore: the store already holds ${present} tokenvault keys; restore into an empty store, or pass --force to delete them first (stop the API first); nothing was restored\n`,
      );
      return 1;
    }
    const deleted = force && present > 0 ? await keyspace.deletePrefix(keys.root) : 0;
    // Before the first key: from here on, an interruption leaves the marker, and the next run of this backup resumes.
    await store.put(
      keys.restoreInProgress,
      JSON.stringify({ backup_sha256: sha256, started_at: new Date().toISOString() }),
    );
    const progress = new Progress({ label: 'restore', unit: 'keys', total: trailer.keys });
    const writer = keyspace.writer();
    try {
      await readBackup(from, async (entry) => {
        await writer.put(entry);
        progress.add();
      });
      await writer.flush();
    } catch (error) {
      // The file was whole a moment ago: it changed during the restore, or the store failed. Either way the store now holds
      // part of the backup, and the marker says so.
      const what = error instanceof BackupFileError ? error.message : `the store failed: ${(error as Error).message}`;
      process.stderr.write(
        `tokenvault restore: ${what}; the store now holds part of the backup: run the same restore again to finish it\n`,
      );
      return 1;
    } finally {
      progress.stop();
    }
    await store.delete(keys.restoreInProgress);
    process.stdout.write(
      `restore: ${trailer.keys} keys from ${from} (revision ${trailer.etcd_revision} of the source store)${deleted > 0 ? `, ${deleted} existing keys deleted first` : ''}${resuming && deleted === 0 ? ', finishing an interrupted restore of it' : ''}, ${Date.now() - started} ms\n`,
    );
    return 0;
  } finally {
    await keyspace.close();
    await store.close();
  }
}

/** The backup a restore marker names (its SHA-256); undefined when it is not one. */
function markerBackup(value: string): string | undefined {
  try {
    const parsed = JSON.parse(value) as { backup_sha256?: unknown };
    return typeof parsed.backup_sha256 === 'string' ? parsed.backup_sha256 : undefined;
  } catch {
    return undefined;
  }
}

/** A running SHA-256 of keys and values in order, each length-prefixed so no two sequences hash alike. */
function entryDigest(): { add(entry: KeyValue): void; hex(): string } {
  const hash = createHash('sha256');
  const length = Buffer.alloc(4);
  const part = (bytes: Buffer) => {
    length.writeUInt32BE(bytes.length);
    hash.update(length);
    hash.update(bytes);
  };
  return {
    add: (entry) => {
      part(entry.key);
      part(entry.value);
    },
    hex: () => hash.digest('hex'),
  };
}

/** The digest of the store's unleased keys under the root, as entryDigest of a backup of it would be. */
async function storeDigest(keyspace: Keyspace): Promise<string> {
  const digest = entryDigest();
  await keyspace.export(keys.root, (entry) => digest.add(entry));
  return digest.hex();
}

/** Keys under the root, counted by the store (leased ones too): the backup's progress total. */
async function countKeys(config: Config): Promise<number> {
  const store = openCommandStore(config.store);
  try {
    return await store.count(keys.root);
  } finally {
    await store.close();
  }
}

function missingKeks(needed: Set<string>, ring: Buffer[]): string[] {
  const have = new Set(ring.map(kekId));
  return [...needed].filter((id) => !have.has(id)).sort();
}

function keyspaceOf(config: Config, command: string): Keyspace | undefined {
  const keyspace = openKeyspace(config.store);
  if (!keyspace) {
    process.stderr.write(
      `tokenvault ${command}: needs an etcd or PostgreSQL store (--store etcd://host:port or postgres://user@host:port/db)\n`,
    );
  }
  return keyspace;
}

function usage(command: string, parsed: unknown, text: string): number {
  if (typeof parsed === 'string') process.stderr.write(`tokenvault ${command}: ${parsed}\n`);
  process.stderr.write(`${text}\n`);
  return 2;
}

/**
 * This command's own flags out of argv (`--name value`, `--name=value`, boolean `--name`); the rest is for
 * loadConfig. A string: what is wrong.
 */
function takeFlags(
  argv: string[],
  valued: string[],
  booleans: string[],
): { values: Record<string, string | undefined>; flags: Set<string>; rest: string[] } | string {
  const values: Record<string, string | undefined> = {};
  const flags = new Set<string>();
  const rest: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const match = /^--([a-z-]+)(?:=(.*))?$/s.exec(argv[i]);
    const name = match?.[1];
    if (name !== undefined && valued.includes(name)) {
      const value = match![2] ?? argv[++i];
      if (value === undefined || value === '') return `--${name} needs a value`;
      values[name] = value;
    } else if (name !== undefined && booleans.includes(name)) {
      if (match![2] !== undefined) return `--${name} takes no value`;
      flags.add(name);
    } else {
      rest.push(argv[i]);
    }
  }
  return { values, flags, rest };
}
