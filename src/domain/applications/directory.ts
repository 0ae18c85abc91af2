// A per-process view of applications, kept current by per-tenant watches: what keys derived from an application (the
// sessions it authorized, the short-lived keys minted for its reactors) check on every request, so that deleting the
// application, regenerating its key or changing its rights ends them on every replica as fast as a watch event.
import { createHash } from 'node:crypto';
import { keys } from '../../store/keys.js';
import type { Store } from '../../store/store.js';
import { PrefixWatchedCache } from '../../store/watched-cache.js';
import type { ApplicationRecord } from './service.js';
import { decode } from '../../store/codec.js';
import type { StoredAt } from '../../store/records.js';

export interface LiveApplication {
  record: ApplicationRecord;
  /** The record's etcd revision when it was read (what a write that must not outlive it compares). */
  modRevision: number;
  /** `grantOf(record)`, computed once per cached read. */
  grant: string;
  /** Per key id, `keyGrantOf(record, key)`. */
  keyGrants: ReadonlyMap<string, string>;
}

/**
 * A digest of everything that decides what keys derived from the application may do: its keys, type, permissions,
 * rules and expiry. A renamed application keeps its grant; anything else changes it. Keys minted for its reactors
 * (and sessions authorized by a key that does not name itself) derive from this one.
 */
export function grantOf(record: ApplicationRecord): string {
  // The keys' hashes joined: with one key this is the material of records from before several keys (a bare hash), so
  // grants recorded then still hold.
  return digest(record.keys.map((k) => k.key_hash).join(',') || null, record);
}

/**
 * The grant a session authorized with one of the application's keys derives from: that key and the application's
 * rights. Deleting that key ends the session; creating or deleting another key does not (a rotation keeps sessions).
 */
export function keyGrantOf(record: ApplicationRecord, key: { key_hash: string }): string {
  return digest(key.key_hash, record);
}

function digest(keyMaterial: string | null, record: ApplicationRecord): string {
  const material = JSON.stringify([
    keyMaterial,
    record.type,
    record.permissions,
    record.rules,
    record.expires_at ?? null,
  ]);
  return createHash('sha256').update(material).digest('base64url');
}

function liveOf(record: ApplicationRecord, modRevision: number): LiveApplication {
  return {
    record,
    modRevision,
    grant: grantOf(record),
    keyGrants: new Map(record.keys.map((k) => [k.id, keyGrantOf(record, k)])),
  };
}

export class ApplicationDirectory {
  private readonly cache: PrefixWatchedCache<LiveApplication>;

  constructor(
    private readonly store: Store,
    cacheSeconds: number,
  ) {
    this.cache = new PrefixWatchedCache(store, { max: 100_000, ttlSeconds: cacheSeconds });
  }

  stop(): Promise<void> {
    return this.cache.stop();
  }

  /** The application as stored now (within a watch event), or undefined when it is gone or has expired. */
  async get(tenantId: string, applicationId: string): Promise<LiveApplication | undefined> {
    const live = await this.read(tenantId, applicationId);
    if (live?.record.expires_at !== undefined && Date.parse(live.record.expires_at) <= Date.now()) return undefined;
    return live;
  }

  /**
   * The application as stored (within a watch event; an expired one too), with its key and revision: what a reactor
   * attached to it checks and compares, so that thousands of reactors created on one application read it once.
   */
  async storedAt(tenantId: string, applicationId: string): Promise<StoredAt<ApplicationRecord> | undefined> {
    const live = await this.read(tenantId, applicationId);
    return (
      live && { value: live.record, modRevision: live.modRevision, key: keys.application(tenantId, applicationId) }
    );
  }

  private read(tenantId: string, applicationId: string): Promise<LiveApplication | undefined> {
    const key = keys.application(tenantId, applicationId);
    return this.cache.get(keys.applications(tenantId), key, async () => {
      const entry = await this.store.get(key);
      if (!entry) return undefined;
      return liveOf(decode<ApplicationRecord>('application', entry.value), entry.modRevision);
    });
  }
}
