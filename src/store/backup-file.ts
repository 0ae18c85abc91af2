// The file `tokenvault backup` writes and `tokenvault restore` reads: gzip of newline-separated JSON. First a header,
// then one line per key (key and value in base64, byte-exact), then a trailer (counts, the etcd revision, the ids of
// the key-encryption keys the data needs), then the SHA-256 of every byte before it. gzip's own CRC catches most
// damage; the SHA-256 line is what proves the file is complete, since a file cut at a line boundary is valid gzip
// when the cut lands on a block end, and a file whose last line is missing is caught by nothing else.
// The file holds ciphertexts and wrapped keys only: never a KEK (docs/operations.md, "Backup and restore").
import { createHash, type Hash } from 'node:crypto';
import { createReadStream, createWriteStream, rmSync } from 'node:fs';
import { rename, rm } from 'node:fs/promises';
import { once } from 'node:events';
import { pipeline } from 'node:stream/promises';
import { createGunzip, createGzip, type Gzip } from 'node:zlib';
import type { KeyValue } from './keyspace.js';

export const BACKUP_FORMAT = 'tokenvault-backup';
export const BACKUP_VERSION = 1;

export interface BackupHeader {
  format: typeof BACKUP_FORMAT;
  version: number;
  created_at: string;
  /** The key prefix the backup covers (keys are stored whole, prefix included). */
  prefix: string;
}

export interface BackupTrailer {
  end: true;
  keys: number;
  leased_skipped: number;
  etcd_revision: number;
  /** Ids (src/crypto/keyring.ts: kekId) of the key-encryption keys that wrap the tenants' keys in this backup. */
  kek_ids: string[];
}

/** A backup file that is not one, or not whole. The message names the file and what is wrong, never its content. */
export class BackupFileError extends Error {
  constructor(file: string, reason: string) {
    super(`${file} is not a usable tokenvault backup: ${reason}`);
    this.name = 'BackupFileError';
  }
}

/** A corrupt file could hold one endless "line"; no real line comes near this (etcd values are at most 1.5 MiB). */
const MAX_LINE_CHARS = 16 * 1024 * 1024;
/** What the writer gathers before one gzip write. */
const WRITE_CHUNK_CHARS = 256 * 1024;

export class BackupWriter {
  private readonly hash: Hash = createHash('sha256');
  private readonly gzip: Gzip = createGzip();
  private readonly done: Promise<void>;
  private readonly partial?: string;
  private bytes = 0;
  /** Lines not yet given to gzip: written a chunk at a time, since a zlib call per line costs more than the line. */
  private pending: string[] = [];
  private pendingChars = 0;

  /**
   * A file is written as `<file>.partial` and renamed on finish, so a failed backup never looks like a whole one. A
   * stream (standard output) is written as is and left open.
   */
  constructor(private readonly target: string | NodeJS.WritableStream) {
    this.gzip.on('data', (chunk: Buffer) => (this.bytes += chunk.length));
    if (typeof target === 'string') {
      this.partial = `${target}.partial`;
      // A new file, so the mode applies (a leftover of a failed run would keep its own).
      rmSync(this.partial, { force: true });
      this.done = pipeline(this.gzip, createWriteStream(this.partial, { mode: 0o600 }));
    } else {
      this.done = new Promise((resolve, reject) => {
        this.gzip.once('end', resolve);
        this.gzip.once('error', reject);
        target.once('error', reject);
      });
      this.gzip.pipe(target, { end: false });
    }
    // Surfaced by finish() or abort(); without a handler a write error would be an unhandled rejection.
    this.done.catch(() => undefined);
  }

  async header(header: Omit<BackupHeader, 'format' | 'version'>): Promise<void> {
    await this.line({ format: BACKUP_FORMAT, version: BACKUP_VERSION, ...header });
  }

  async entry(entry: KeyValue): Promise<void> {
    await this.line({ k: entry.key.toString('base64'), v: entry.value.toString('base64') });
  }

  /** Writes the trailer and checksum and puts the file in place; the backup's size in bytes. */
  async finish(trailer: Omit<BackupTrailer, 'end'>): Promise<number> {
    await this.line({ end: true, ...trailer });
    await this.flush();
    this.gzip.end(`${JSON.stringify({ sha256: this.hash.digest('hex') })}\n`);
    await this.done;
    if (typeof this.target === 'string') await rename(this.partial!, this.target);
    return this.bytes;
  }

  async abort(): Promise<void> {
    this.gzip.destroy();
    await this.done.catch(() => undefined);
    if (this.partial) await rm(this.partial, { force: true });
  }

  private async line(value: unknown): Promise<void> {
    const text = `${JSON.stringify(value)}\n`;
    this.pending.push(text);
    this.pendingChars += text.length;
    if (this.pendingChars >= WRITE_CHUNK_CHARS) await this.flush();
  }

  private async flush(): Promise<void> {
    if (this.pending.length === 0) return;
    const chunk = this.pending.join('');
    this.pending = [];
    this.pendingChars = 0;
    this.hash.update(chunk);
    if (!this.gzip.write(chunk)) await Promise.race([once(this.gzip, 'drain'), this.done]);
  }
}

/**
 * Reads a backup file through, checking its structure and checksum; `each` sees every entry (pass none to only
 * verify). Throws BackupFileError for a file that is corrupt, truncated or not a backup; `each` only ever sees
 * entries of a file whose header is right, but the checksum is known only at the end: verify before acting.
 */
export async function readBackup(
  file: string,
  each?: (entry: KeyValue) => Promise<void> | void,
): Promise<{ header: BackupHeader; trailer: BackupTrailer; sha256: string }> {
  const hash = createHash('sha256');
  let header: BackupHeader | undefined;
  let trailer: BackupTrailer | undefined;
  let checked = false;
  let sha256 = '';
  let entries = 0;
  const fail = (reason: string): never => {
    throw new BackupFileError(file, reason);
  };

  const take = async (line: string) => {
    if (checked) fail('data after the checksum');
    const value = parseLine(line) ?? fail('a line is not JSON (the file is corrupt)');
    if (!header) {
      if (value.format !== BACKUP_FORMAT) fail('no tokenvault backup header (wrong file?)');
      if (value.version !== BACKUP_VERSION)
        fail(`format version ${String(value.version)} (this version reads ${BACKUP_VERSION})`);
      header = value as unknown as BackupHeader;
    } else if (!trailer && value.end === true) {
      trailer = value as unknown as BackupTrailer;
      if (trailer.keys !== entries) fail(`the trailer counts ${trailer.keys} keys, the file holds ${entries}`);
    } else if (!trailer) {
      if (typeof value.k !== 'string' || typeof value.v !== 'string')
        fail('an entry without key and value (the file is corrupt)');
      entries++;
      if (each)
        await each({ key: Buffer.from(value.k as string, 'base64'), value: Buffer.from(value.v as string, 'base64') });
    } else {
      if (typeof value.sha256 !== 'string') fail('no checksum after the trailer');
      if (value.sha256 !== hash.digest('hex')) fail('checksum mismatch (the file was changed or damaged)');
      checked = true;
      sha256 = value.sha256 as string;
      return;
    }
    hash.update(`${line}\n`);
  };

  const gunzip = createGunzip();
  gunzip.setEncoding('utf8');
  const source = createReadStream(file);
  source.on('error', (error) => gunzip.destroy(error));
  source.pipe(gunzip);
  let rest = '';
  try {
    for await (const chunk of gunzip as AsyncIterable<string>) {
      rest += chunk;
      let newline: number;
      while ((newline = rest.indexOf('\n')) >= 0) {
        const line = rest.slice(0, newline);
        rest = rest.slice(newline + 1);
        await take(line);
      }
      if (rest.length > MAX_LINE_CHARS) fail('a line longer than any backup writes (the file is corrupt)');
    }
  } catch (error) {
    if (error instanceof BackupFileError) throw error;
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' || code === 'EACCES' || code === 'EISDIR') throw error;
    // zlib: "unexpected end of file" (truncated), "incorrect header check" (not gzip), CRC and length mismatches.
    fail(`${(error as Error).message} (the file is truncated or corrupt)`);
  } finally {
    source.destroy();
  }
  if (rest !== '') fail('the last line is cut off (the file is truncated)');
  if (!header) fail('empty file');
  if (!trailer || !checked) fail('it ends before its trailer and checksum (the file is truncated)');
  return { header: header!, trailer: trailer!, sha256 };
}

function parseLine(line: string): Record<string, unknown> | undefined {
  try {
    const value: unknown = JSON.parse(line);
    return value !== null && typeof value === 'object' && !Array.isArray(value)
      ? (value as Record<string, unknown>)
      : undefined;
  } catch {
    return undefined;
  }
}
