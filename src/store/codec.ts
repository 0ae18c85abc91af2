// The one codec of stored records (docs/adr/0006-record-versions.md). Every JSON record the vault keeps in the store
// is written by `encode` and read by `decode`, so the shape of a record can change without a migration job: a record
// names its schema version in a reserved `_v` member, and `decode` upgrades older records in memory, one step at a
// time, before the caller sees them. Records written before versions existed carry no `_v` and read as version 1,
// whose shape is exactly theirs.
//
// The upgrades are plain JSON → JSON functions, so this module stays below the domain (the store knows keys and
// bytes, not concepts): an upgrade never imports a domain type.

/** The kinds of stored record. Plain-string index entries (fingerprint → token id) are not records. */
export type RecordKind =
  | 'token'
  | 'application'
  /** api key hash → principal: application keys, session keys and the short-lived keys reactors get. */
  | 'key-index'
  | 'session'
  | 'session-nonce'
  | 'tenant'
  | 'tenant-keys'
  | 'proxy'
  | 'proxy-key'
  | 'reactor'
  | 'formula'
  | 'idempotency'
  | 'webhook'
  | 'webhook-subscriptions'
  | 'webhook-delivery'
  | 'async-result'
  | 'token-intent'
  /** A client-side encryption key (/keys): public key, sealed private key, expiry. */
  | 'client-key'
  /** The audit log (src/audit): an entry, a tenant's chain head, a tenant's retention anchor. */
  | 'audit-entry'
  | 'audit-head'
  | 'audit-anchor';

type Json = Record<string, unknown>;
/** Turns a record of version n into version n + 1. */
export type Upgrade = (record: Json) => Json;

/** The member that carries the schema version; every record's own members are snake_case names without a `_`. */
export const VERSION_FIELD = '_v';

/**
 * Per kind, the upgrades in order: `upgrades[kind][n - 1]` turns version n into n + 1, so the current version of a
 * kind is one more than the number of its upgrades. To change a record's shape, append one function here (and a test
 * that reads the previous shape); never edit or remove an existing step, records of every older version may exist.
 */
export const UPGRADES: Record<RecordKind, readonly Upgrade[]> = {
  token: [],
  application: [
    // v1 → v2: one key per application (`key_hash` beside `keys[0]`) becomes many, each key carrying its own hash.
    applicationKeysCarryHashes,
  ],
  'key-index': [],
  session: [],
  'session-nonce': [],
  tenant: [],
  'tenant-keys': [],
  proxy: [],
  'proxy-key': [],
  reactor: [],
  formula: [],
  idempotency: [],
  webhook: [],
  'webhook-subscriptions': [],
  'webhook-delivery': [],
  'async-result': [],
  'token-intent': [],
  'client-key': [],
  'audit-entry': [],
  'audit-head': [],
  'audit-anchor': [],
};

/**
 * An application of v1 had at most one key: its hash in `key_hash`, its id and dates in `keys[0]`. From v2 every
 * entry of `keys` carries its own `key_hash`, so an application can have several live keys. The v1 key becomes the
 * first key with the same id, so its index entry, its sessions and the id callers know all stay valid.
 */
function applicationKeysCarryHashes(record: Json): Json {
  const { key_hash: hash, keys: listed, ...rest } = record;
  const entries = Array.isArray(listed) ? (listed as Json[]) : [];
  if (typeof hash !== 'string') return { ...rest, keys: [] };
  const first = entries[0] ?? {
    // Never written by any release (v1 always listed its key), but a hand-edited record still reads the same way twice.
    id: uuidFromHash(hash),
    created_at: record.created_at,
    created_by: record.created_by,
  };
  return { ...rest, keys: [{ ...first, key_hash: hash }] };
}

/** A stable v4-shaped UUID from a hex digest. */
function uuidFromHash(hex: string): string {
  const h = hex.padEnd(32, '0');
  const variant = ((parseInt(h[16], 16) & 0x3) | 0x8).toString(16);
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-4${h.slice(13, 16)}-${variant}${h.slice(17, 20)}-${h.slice(20, 32)}`;
}

/** The version `encode` writes for a kind. */
export function currentVersion(kind: RecordKind, table: Record<RecordKind, readonly Upgrade[]> = UPGRADES): number {
  return table[kind].length + 1;
}

/** A record of a version this build cannot read: written by a newer release (readers must be deployed first). */
export class RecordVersionError extends Error {
  constructor(
    readonly kind: RecordKind,
    readonly version: unknown,
  ) {
    super(`a stored ${kind} record has schema version ${String(version)}, newer than this build reads`);
    this.name = 'RecordVersionError';
  }
}

/** The stored text of a record: its members with the kind's current version first. */
export function encode(
  kind: RecordKind,
  value: object,
  table: Record<RecordKind, readonly Upgrade[]> = UPGRADES,
): string {
  const version = currentVersion(kind, table);
  // The version stays the first member, and a stale `_v` in `value` (a record copied from raw JSON) cannot win.
  return JSON.stringify(Object.assign({ [VERSION_FIELD]: version }, value, { [VERSION_FIELD]: version }));
}

/** A record read back at the kind's current shape, without the version member. */
export function decode<T>(kind: RecordKind, text: string, table: Record<RecordKind, readonly Upgrade[]> = UPGRADES): T {
  const { [VERSION_FIELD]: stored, ...rest } = JSON.parse(text) as Json;
  const version = stored ?? 1;
  const steps = table[kind];
  if (typeof version !== 'number' || !Number.isInteger(version) || version < 1 || version > steps.length + 1) {
    throw new RecordVersionError(kind, version);
  }
  let record: Json = rest;
  for (let at = version; at <= steps.length; at++) record = steps[at - 1](record);
  return record as T;
}
