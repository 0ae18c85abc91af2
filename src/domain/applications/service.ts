// Applications of a tenant and their keys. An application's record and its key-index entry are always written in
// one transaction, guarded by the record's revision, so a concurrent update never leaves the key authorizing
// something the record no longer says.
import { randomUUID } from 'node:crypto';
import { generateApiKey, hashKey } from '../../auth/api-keys.js';
import { actorId, type KeyIndexEntry, type TenantPrincipal } from '../../auth/principal.js';
import { assertMayChange, chosenId, managedByOf, type ManagedBy } from '../../auth/ownership.js';
import { Errors } from '../../errors/registry.js';
import { keys } from '../../store/keys.js';
import { getRecord, listRecords } from '../../store/records.js';
import type { Store, TxnOp } from '../../store/store.js';
import { checkRules, type AccessRule } from '../../auth/access/rules.js';
import { paginate, type Page, type PageRequest } from '../paging.js';
import { permissionsFor, type ApplicationType } from '../../auth/permissions.js';
import { assertMayGrant, assertMayOutlive } from './delegation.js';
import type { CreateApplicationBody, UpdateApplicationBody } from './schema.js';
import { encode } from '../../store/codec.js';

/** An application's key as listed: the key itself is shown only in the response that created it. */
export interface ApplicationKey {
  id: string;
  key?: string;
  created_at: string;
  created_by: string;
}

/** The stored application. `key_hash` never leaves the service. An application created with create_key=false has none. */
export interface ApplicationRecord {
  id: string;
  tenant_id: string;
  name: string;
  type: ApplicationType;
  permissions: string[];
  rules: AccessRule[];
  key_hash?: string;
  keys: ApplicationKey[];
  expires_at?: string;
  /** Set when a Kubernetes Application object declares it; then only the operator may change it. */
  managed_by?: ManagedBy;
  created_at: string;
  created_by: string;
  modified_at?: string;
  modified_by?: string;
}

/** The wire form. `key` (the platform's older field) and `keys[0].key` carry a new key, once. */
export type Application = Omit<ApplicationRecord, 'key_hash'> & { key?: string };

export function toApplication(record: ApplicationRecord, key?: string): Application {
  const { key_hash: _hidden, ...application } = record;
  if (key === undefined) return application;
  return { ...application, key, keys: application.keys.map((k, i) => (i === 0 ? { ...k, key } : k)) };
}

/** A fresh key for an application, and the record fields that describe it. */
function newKey(actor: string, key = generateApiKey()) {
  const meta: ApplicationKey = { id: randomUUID(), created_at: new Date().toISOString(), created_by: actor };
  return { key, key_hash: hashKey(key), keys: [meta] };
}

export function keyIndexEntry(record: ApplicationRecord): KeyIndexEntry {
  return {
    tenant_id: record.tenant_id,
    kind: 'application',
    application_id: record.id,
    application_type: record.type,
    permissions: record.permissions,
    rules: record.rules,
    expires_at: record.expires_at,
  };
}

/** The writes that store an application: the record and, when it has a key, its index entry. */
export function createApplicationOps(record: ApplicationRecord): TxnOp[] {
  const ops: TxnOp[] = [
    { type: 'put', key: keys.application(record.tenant_id, record.id), value: encode('application', record) },
  ];
  if (record.key_hash)
    ops.push({ type: 'put', key: keys.apiKey(record.key_hash), value: encode('key-index', keyIndexEntry(record)) });
  return ops;
}

/** The compare that makes a write fail rather than take over a key already in use. */
function keyIsFree(record: ApplicationRecord) {
  return record.key_hash ? [{ key: keys.apiKey(record.key_hash), modRevision: 0 }] : [];
}

export interface NewApplication {
  record: ApplicationRecord;
  key?: string;
}

export class ApplicationService {
  constructor(private readonly store: Store) {}

  /** Builds (does not store) a new application with a fresh key, after checking its permissions and rules. */
  prepare(
    tenantId: string,
    actor: string,
    body: CreateApplicationBody,
    givenKey?: string,
    managedBy?: ManagedBy,
  ): NewApplication {
    checkGrants(body.type, body.permissions ?? [], body.rules ?? [], body.expires_at);
    const { key, ...keyFields } = body.create_key === false ? { key: undefined, keys: [] } : newKey(actor, givenKey);
    const record: ApplicationRecord = {
      id: body.id ?? randomUUID(),
      tenant_id: tenantId,
      name: body.name,
      type: body.type,
      permissions: body.permissions ?? [],
      rules: body.rules ?? [],
      ...keyFields,
      expires_at: body.expires_at,
      ...(managedBy ? { managed_by: managedBy } : {}),
      created_at: new Date().toISOString(),
      created_by: actor,
    };
    return { record, key };
  }

  async create(principal: TenantPrincipal, body: CreateApplicationBody): Promise<Application> {
    chosenId(principal, body.id);
    assertMayGrant(principal, body.type, body.permissions ?? []);
    assertMayOutlive(principal, body.expires_at);
    const { record, key } = this.prepare(
      principal.tenantId,
      actorId(principal),
      body,
      undefined,
      managedByOf(principal),
    );
    await this.insert(record);
    return toApplication(record, key);
  }

  /** Stores a prepared application; its id and key must not be in use. */
  async insert(record: ApplicationRecord): Promise<void> {
    const created = await this.store.txn({
      compare: [{ key: keys.application(record.tenant_id, record.id), modRevision: 0 }, ...keyIsFree(record)],
      success: createApplicationOps(record),
    });
    if (created) return;
    if (await this.store.get(keys.application(record.tenant_id, record.id))) {
      throw new Errors.Conflict(`An application with the id ${record.id} already exists.`);
    }
    throw new Errors.Conflict('The key is already in use.');
  }

  async list(tenantId: string, paging: PageRequest, ids?: string[], types?: string[]): Promise<Page<Application>> {
    let records = await listRecords<ApplicationRecord>(this.store, 'application', keys.applications(tenantId));
    if (ids && ids.length > 0) records = records.filter((r) => ids.includes(r.id));
    if (types && types.length > 0) records = records.filter((r) => types.includes(r.type));
    records.sort((a, b) => a.created_at.localeCompare(b.created_at) || a.id.localeCompare(b.id));
    return paginate(
      records.map((r) => toApplication(r)),
      paging,
    );
  }

  async get(tenantId: string, id: string): Promise<Application> {
    return toApplication((await this.load(tenantId, id)).value);
  }

  async update(principal: TenantPrincipal, id: string, body: UpdateApplicationBody): Promise<Application> {
    const actor = actorId(principal);
    const current = await this.load(principal.tenantId, id);
    assertMayChange(current.value, principal, 'application');
    if (body.type !== undefined && body.type !== current.value.type) {
      throw new Errors.InvalidBody({ errors: { type: ['cannot be changed'] } });
    }
    checkGrants(current.value.type, body.permissions ?? [], body.rules ?? [], body.expires_at);
    assertMayGrant(principal, current.value.type, [...current.value.permissions, ...(body.permissions ?? [])]);
    assertMayOutlive(principal, body.expires_at);
    const record: ApplicationRecord = {
      ...current.value,
      name: body.name,
      permissions: body.permissions ?? [],
      rules: body.rules ?? [],
      expires_at: body.expires_at,
      modified_at: new Date().toISOString(),
      modified_by: actor,
    };
    await this.replace(current.modRevision, record, []);
    return toApplication(record);
  }

  /** A new key for the application; the old one stops working at once. */
  async regenerate(principal: TenantPrincipal, id: string): Promise<Application> {
    const actor = actorId(principal);
    const current = await this.load(principal.tenantId, id);
    assertMayChange(current.value, principal, 'application');
    assertMayGrant(principal, current.value.type, current.value.permissions);
    assertMayOutlive(principal, current.value.expires_at);
    const { key, ...keyFields } = newKey(actor);
    const record: ApplicationRecord = {
      ...current.value,
      ...keyFields,
      modified_at: new Date().toISOString(),
      modified_by: actor,
    };
    await this.replace(current.modRevision, record, revokeKey(current.value));
    return toApplication(record, key);
  }

  async delete(principal: TenantPrincipal, id: string): Promise<void> {
    const tenantId = principal.tenantId;
    const current = await this.load(tenantId, id);
    assertMayChange(current.value, principal, 'application');
    const deleted = await this.store.txn({
      compare: [{ key: keys.application(tenantId, id), modRevision: current.modRevision }],
      success: [{ type: 'delete', key: keys.application(tenantId, id) }, ...revokeKey(current.value)],
    });
    if (!deleted) throw new Errors.Conflict('The application changed while it was being deleted; retry.');
  }

  private async load(tenantId: string, id: string) {
    const found = await getRecord<ApplicationRecord>(this.store, 'application', keys.application(tenantId, id));
    if (!found) throw new Errors.NotFound('Application not found.');
    return found;
  }

  private async replace(expected: number, record: ApplicationRecord, extra: TxnOp[]): Promise<void> {
    const written = await this.store.txn({
      compare: [
        { key: keys.application(record.tenant_id, record.id), modRevision: expected },
        ...(extra.length ? keyIsFree(record) : []),
      ],
      success: [...extra, ...createApplicationOps(record)],
    });
    if (!written) throw new Errors.Conflict('The application was changed by another request; retry.');
  }
}

function revokeKey(record: ApplicationRecord): TxnOp[] {
  return record.key_hash ? [{ type: 'delete', key: keys.apiKey(record.key_hash) }] : [];
}

/** Permissions and rules must be ones the application type may hold; expiry must be in the future. */
function checkGrants(type: ApplicationType, permissions: string[], rules: AccessRule[], expiresAt?: string) {
  const allowed = permissionsFor(type);
  const errors: Record<string, string[]> = {};
  permissions.forEach((permission, i) => {
    if (!allowed.includes(permission)) {
      (errors[`permissions[${i}]`] ??= []).push(`${permission} cannot be granted to a ${type} application`);
    }
  });
  if (type === 'management' && rules.length > 0) errors.rules = ['management applications cannot have access rules'];
  else Object.assign(errors, checkRules(rules, 'rules', allowed));
  if (expiresAt !== undefined && Date.parse(expiresAt) <= Date.now()) errors.expires_at = ['must be in the future'];
  if (Object.keys(errors).length > 0) throw new Errors.InvalidBody({ errors });
}
