// What one audit-log entry is, and how entries are chained: each entry carries the hash of the entry before it in its
// chain (a tenant has one per API process that wrote to it: its lane, see chain.ts), and its own hash over the
// canonical JSON of everything else (prev_hash and lane included), so changing, removing or reordering a stored entry
// breaks a link that `tokenvault audit verify` finds.
import { createHash } from 'node:crypto';

/** The kinds of things an entry is about: the fixed list GET /logs/entity-types answers. */
export const ENTITY_TYPES = [
  { value: 'application', display_name: 'Application' },
  { value: 'application_key', display_name: 'Application Key' },
  { value: 'client_encryption_key', display_name: 'Client Encryption Key' },
  { value: 'proxy', display_name: 'Proxy' },
  { value: 'reactor', display_name: 'Reactor' },
  { value: 'reactor_formula', display_name: 'Reactor Formula' },
  { value: 'session', display_name: 'Session' },
  { value: 'tenant', display_name: 'Tenant' },
  { value: 'token', display_name: 'Token' },
  { value: 'token_intent', display_name: 'Token Intent' },
  { value: 'webhook', display_name: 'Webhook' },
] as const;

export type EntityType = (typeof ENTITY_TYPES)[number]['value'];

export const OPERATIONS = ['create', 'read', 'update', 'delete', 'use'] as const;
export type Operation = (typeof OPERATIONS)[number];

/** What a caller records: who did what to which entity. Never token data, keys or reactor arguments. */
export interface AuditRecord {
  tenant_id: string;
  /** The application (or session, or the operator's fixed id) that acted; absent for an unauthenticated proxy call. */
  actor_id?: string;
  actor_type: 'application' | 'session' | 'operator' | 'proxy_key';
  /** Which of the application's keys was presented, when the key has an id of its own. */
  key_id?: string;
  entity_type: EntityType;
  entity_id?: string;
  operation: Operation;
  message: string;
  trace_id?: string;
  /** Written as a log line only, never stored (the tenant's log is being deleted, or the change is global). */
  line_only?: true;
}

/** An entry as stored: the record, its place in one of the tenant's chains, and the chain's hashes. */
export interface AuditEntry extends AuditRecord {
  id: string;
  /** The chain (one per API process that wrote to the tenant) it is in; absent in entries written before lanes. */
  lane?: string;
  /** 1, 2, 3, … per lane, with no gaps. */
  seq: number;
  /** ISO 8601; never earlier than the entry before it (see chain.ts). */
  created_at: string;
  /** `hash` of the lane's entry before (seq - 1); GENESIS for its first entry. */
  prev_hash: string;
  /** sha-256 (hex) of the canonical JSON of every other field. */
  hash: string;
}

export const GENESIS = '0'.repeat(64);

/**
 * Canonical JSON of a flat entry: keys sorted, undefined fields left out, values as JSON.stringify writes them. Entries
 * hold only strings and integers, for which this is exactly RFC 8785 (JSON Canonicalization Scheme).
 */
export function canonicalJson(fields: Record<string, unknown>): string {
  const names = Object.keys(fields)
    .filter((name) => fields[name] !== undefined)
    .sort();
  return `{${names.map((name) => `${JSON.stringify(name)}:${JSON.stringify(fields[name])}`).join(',')}}`;
}

/** The hash an entry must carry: over the canonical JSON of all its fields but `hash`. */
export function hashOf(entry: Omit<AuditEntry, 'hash'> & { hash?: string }): string {
  const { hash: _ignored, ...rest } = entry;
  return createHash('sha256').update(canonicalJson(rest)).digest('hex');
}

/** The entry as GET /logs answers it (the fields of the platform's Log, plus key_id). */
export function publicEntry(entry: AuditEntry): Record<string, unknown> {
  return {
    id: entry.id,
    tenant_id: entry.tenant_id,
    actor_id: entry.actor_id,
    actor_type: entry.actor_type,
    key_id: entry.key_id,
    entity_type: entry.entity_type,
    entity_id: entry.entity_id,
    operation: entry.operation,
    message: entry.message,
    created_at: entry.created_at,
  };
}
