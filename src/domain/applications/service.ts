// Applications of a tenant and their keys. An application's record and its key-index entry are always written in
// one transaction, guarded by the record's revision, so a concurrent update never leaves the key authorizing
// something the record no longer says.
import { randomUUID } from 'node:crypto';
import { generateApiKey, hashKey } from '../../auth/api-keys.js';
import { actorId, type KeyIndexEntry, type TenantPrincipal } from '../../auth/principal.js';
import { assertMayChange, chosenId, managedByOf, type ManagedBy } from '../../auth/ownership.js';
import { Errors } from '../../errors/registry.js';
import { keys } from '../../store/keys.js';
import { getRecord } from '../../store/records.js';
import type { Store, TxnOp } from '../../store/store.js';
import { checkRules, type AccessRule } from '../../auth/access/rules.js';
import { commitChange, type ChangeOptions, type ChangeWrites } from '../audited-commit.js';
import { CreationOrder, orderDelete, orderPut } from '../creation-order.js';
import { TenantLimit, type TenantLimitsSource } from '../tenant-limits.js';
import type { Page, PageRequest } from '../paging.js';
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

/** A key as stored: its SHA-256 (the key itself is never stored). The hash never leaves the service. */
export type StoredApplicationKey = ApplicationKey & { key_hash: string };

/**
 * The stored application (record version 2: every key carries its hash; see codec.ts for the v1 upgrade). An
 * application may have several live keys, so a key can be rotated without downtime; one created with
 * create_key=false has none.
 */
export interface ApplicationRecord {
  id: string;
  tenant_id: string;
  name: string;
  type: ApplicationType;
  permissions: string[];
  rules: AccessRule[];
  keys: StoredApplicationKey[];
  expires_at?: string;
  /** Public applications only: the origins its keys and sessions are taken from (lower case). */
  allowed_origins?: string[];
  /** Set when a Kubernetes Application object declares it; then only the operator may change it. */
  managed_by?: ManagedBy;
  created_at: string;
  created_by: string;
  modified_at?: string;
  modified_by?: string;
}

/** The wire form. `key` (the platform's older field) and `keys[0].key` carry a new key, once. */
export type Application = Omit<ApplicationRecord, 'keys'> & { keys: ApplicationKey[]; key?: string };

export function toApplicationKey({ key_hash: _hidden, ...key }: StoredApplicationKey): ApplicationKey {
  return key;
}

export function toApplication(record: ApplicationRecord, key?: string): Application {
  const application = { ...record, keys: record.keys.map(toApplicationKey) };
  if (key === undefined) return application;
  return { ...application, key, keys: application.keys.map((k, i) => (i === 0 ? { ...k, key } : k)) };
}

/** A fresh key for an application: the key (shown once) and what is stored of it. */
function newKey(actor: string, key = generateApiKey()): { key: string; stored: StoredApplicationKey } {
  return {
    key,
    stored: { id: randomUUID(), key_hash: hashKey(key), created_at: new Date().toISOString(), created_by: actor },
  };
}

export function keyIndexEntry(record: ApplicationRecord, keyId?: string): KeyIndexEntry {
  return {
    tenant_id: record.tenant_id,
    kind: 'application',
    application_id: record.id,
    application_type: record.type,
    ...(keyId ? { key_id: keyId } : {}),
    permissions: record.permissions,
    rules: record.rules,
    expires_at: record.expires_at,
    ...(record.allowed_origins ? { allowed_origins: record.allowed_origins } : {}),
  };
}

/** The writes that create an application: those that store it, and its place in the creation order. */
export function createApplicationOps(record: ApplicationRecord): TxnOp[] {
  return [...storeApplicationOps(record), orderPut(record.tenant_id, 'applications', record)];
}

/** The writes that store an application: the record and an index entry for each of its keys. */
function storeApplicationOps(record: ApplicationRecord): TxnOp[] {
  return [
    { type: 'put', key: keys.application(record.tenant_id, record.id), value: encode('application', record) },
    ...record.keys.map((k): TxnOp => ({
      type: 'put',
      key: keys.apiKey(k.key_hash),
      value: encode('key-index', keyIndexEntry(record, k.id)),
    })),
  ];
}

/** The compares that make a write fail rather than take over a key already in use. */
function keysAreFree(fresh: StoredApplicationKey[]) {
  return fresh.map((k) => ({ key: keys.apiKey(k.key_hash), modRevision: 0 }));
}

function revokeKeys(gone: StoredApplicationKey[]): TxnOp[] {
  return gone.map((k) => ({ type: 'delete', key: keys.apiKey(k.key_hash) }));
}

const NO_KEY_CHANGE = { fresh: [], gone: [] };

export interface NewApplication {
  record: ApplicationRecord;
  key?: string;
}

export interface ApplicationServiceOptions {
  /** Most live keys one application may have (TOKENVAULT_APPLICATION_KEYS_MAX). */
  maxKeys: number;
  /** Applications one tenant may have, 0: no limit (TOKENVAULT_APPLICATIONS_PER_TENANT). */
  perTenant: number;
  /** The tenants' own limits (Tenant spec.limits): the TenantDirectory; without it, perTenant applies to all. */
  tenantLimits?: TenantLimitsSource;
}

export class ApplicationService {
  private readonly order: CreationOrder<ApplicationRecord>;
  private readonly limit: TenantLimit;

  constructor(
    private readonly store: Store,
    private readonly options: ApplicationServiceOptions,
  ) {
    this.order = new CreationOrder(store, 'applications', 'application', keys.applications, keys.application);
    this.limit = new TenantLimit(store, 'applications', options.perTenant, keys.applications, options.tenantLimits);
  }

  /** Builds (does not store) a new application with a fresh key, after checking its permissions and rules. */
  prepare(
    tenantId: string,
    actor: string,
    body: CreateApplicationBody,
    givenKey?: string,
    managedBy?: ManagedBy,
  ): NewApplication {
    checkGrants(body.type, body.permissions ?? [], body.rules ?? [], body.expires_at, body.allowed_origins);
    const fresh = body.create_key === false ? undefined : newKey(actor, givenKey);
    const record: ApplicationRecord = {
      id: body.id ?? randomUUID(),
      tenant_id: tenantId,
      name: body.name,
      type: body.type,
      permissions: body.permissions ?? [],
      rules: body.rules ?? [],
      keys: fresh ? [fresh.stored] : [],
      expires_at: body.expires_at,
      ...originsOf(body),
      ...(managedBy ? { managed_by: managedBy } : {}),
      created_at: new Date().toISOString(),
      created_by: actor,
    };
    return { record, key: fresh?.key };
  }

  async create(
    principal: TenantPrincipal,
    body: CreateApplicationBody,
    options: ChangeOptions = {},
  ): Promise<Application> {
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
    await this.limit.assertRoomFor(principal.tenantId);
    await this.insert(record, options);
    return toApplication(record, key);
  }

  /** Stores a prepared application; its id and key must not be in use. */
  async insert(record: ApplicationRecord, options: ChangeOptions = {}): Promise<void> {
    const txn: ChangeWrites = {
      compare: [{ key: keys.application(record.tenant_id, record.id), modRevision: 0 }, ...keysAreFree(record.keys)],
      success: createApplicationOps(record),
    };
    const created = await commitChange(this.store, record.id, txn, options);
    if (created) return;
    if (await this.store.get(keys.application(record.tenant_id, record.id))) {
      throw new Errors.Conflict(`An application with the id ${record.id} already exists.`);
    }
    throw new Errors.Conflict('The key is already in use.');
  }

  async list(tenantId: string, paging: PageRequest, ids?: string[], types?: string[]): Promise<Page<Application>> {
    const page = await this.order.list(tenantId, paging, {
      ids,
      keep: types?.length ? (r) => types.includes(r.type) : undefined,
    });
    return { ...page, data: page.data.map((r) => toApplication(r)) };
  }

  async get(tenantId: string, id: string): Promise<Application> {
    return toApplication((await this.load(tenantId, id)).value);
  }

  async update(
    principal: TenantPrincipal,
    id: string,
    body: UpdateApplicationBody,
    options: ChangeOptions = {},
  ): Promise<Application> {
    const actor = actorId(principal);
    const current = await this.load(principal.tenantId, id);
    assertMayChange(current.value, principal, 'application');
    if (body.type !== undefined && body.type !== current.value.type) {
      throw new Errors.InvalidBody({ errors: { type: ['cannot be changed'] } });
    }
    checkGrants(current.value.type, body.permissions ?? [], body.rules ?? [], body.expires_at, body.allowed_origins);
    assertMayGrant(principal, current.value.type, [...current.value.permissions, ...(body.permissions ?? [])]);
    assertMayOutlive(principal, body.expires_at);
    const { allowed_origins: _replaced, ...kept } = current.value;
    const record: ApplicationRecord = {
      ...kept,
      name: body.name,
      permissions: body.permissions ?? [],
      rules: body.rules ?? [],
      expires_at: body.expires_at,
      ...originsOf(body),
      modified_at: new Date().toISOString(),
      modified_by: actor,
    };
    await this.replace(current.modRevision, record, NO_KEY_CHANGE, { entityId: id, ...options });
    return toApplication(record);
  }

  /** One new key in place of all the application's keys; the old ones stop working at once. */
  async regenerate(principal: TenantPrincipal, id: string, options: ChangeOptions = {}): Promise<Application> {
    const actor = actorId(principal);
    const current = await this.loadForKeyChange(principal, id);
    const { key, stored } = newKey(actor);
    const record: ApplicationRecord = {
      ...current.value,
      keys: [stored],
      modified_at: new Date().toISOString(),
      modified_by: actor,
    };
    await this.replace(
      current.modRevision,
      record,
      { fresh: [stored], gone: current.value.keys },
      { entityId: id, ...options },
    );
    return toApplication(record, key);
  }

  /** One more live key (the others keep working): how a key is rotated without downtime. The key is shown once. */
  async createKey(principal: TenantPrincipal, id: string, options: ChangeOptions = {}): Promise<ApplicationKey> {
    const actor = actorId(principal);
    const current = await this.loadForKeyChange(principal, id);
    if (current.value.keys.length >= this.options.maxKeys) {
      throw new Errors.ApplicationKeyLimit(
        `The application has ${current.value.keys.length} keys, the most one application may have ` +
          `(TOKENVAULT_APPLICATION_KEYS_MAX = ${this.options.maxKeys}); delete a key first.`,
      );
    }
    const { key, stored } = newKey(actor);
    const record: ApplicationRecord = {
      ...current.value,
      keys: [...current.value.keys, stored],
      modified_at: new Date().toISOString(),
      modified_by: actor,
    };
    // The entry is about the new key (its audit entity is the application key).
    await this.replace(current.modRevision, record, { fresh: [stored], gone: [] }, { entityId: stored.id, ...options });
    return { ...toApplicationKey(stored), key };
  }

  /** The application's keys, oldest first, without the keys themselves. */
  async listKeys(tenantId: string, id: string): Promise<ApplicationKey[]> {
    return (await this.load(tenantId, id)).value.keys.map(toApplicationKey);
  }

  async getKey(tenantId: string, id: string, keyId: string): Promise<ApplicationKey> {
    const found = (await this.load(tenantId, id)).value.keys.find((k) => k.id === keyId);
    if (!found) throw new Errors.NotFound('Application key not found.');
    return toApplicationKey(found);
  }

  /**
   * Revokes one key: its index entry goes in the same transaction as the record, so it fails authentication at once
   * here and, through the watched key cache, on every other replica as fast as a watch event; sessions it authorized
   * end with it (their grant names the key, see directory.ts).
   */
  async deleteKey(principal: TenantPrincipal, id: string, keyId: string, options: ChangeOptions = {}): Promise<void> {
    const current = await this.load(principal.tenantId, id);
    assertMayChange(current.value, principal, 'application');
    const gone = current.value.keys.find((k) => k.id === keyId);
    if (!gone) throw new Errors.NotFound('Application key not found.');
    const record: ApplicationRecord = {
      ...current.value,
      keys: current.value.keys.filter((k) => k.id !== keyId),
      modified_at: new Date().toISOString(),
      modified_by: actorId(principal),
    };
    await this.replace(current.modRevision, record, { fresh: [], gone: [gone] }, { entityId: keyId, ...options });
  }

  async delete(principal: TenantPrincipal, id: string, options: ChangeOptions = {}): Promise<void> {
    const tenantId = principal.tenantId;
    const current = await this.load(tenantId, id);
    assertMayChange(current.value, principal, 'application');
    const txn: ChangeWrites = {
      compare: [{ key: keys.application(tenantId, id), modRevision: current.modRevision }],
      success: [
        { type: 'delete', key: keys.application(tenantId, id) },
        orderDelete(tenantId, 'applications', current.value),
        ...revokeKeys(current.value.keys),
      ],
    };
    const deleted = await commitChange(this.store, id, txn, options);
    if (!deleted) throw new Errors.Conflict('The application changed while it was being deleted; retry.');
  }

  private async load(tenantId: string, id: string) {
    const found = await getRecord<ApplicationRecord>(this.store, 'application', keys.application(tenantId, id));
    if (!found) throw new Errors.NotFound('Application not found.');
    return found;
  }

  /** A new key gives the holder the application's rights: the caller must be able to grant them itself. */
  private async loadForKeyChange(principal: TenantPrincipal, id: string) {
    const current = await this.load(principal.tenantId, id);
    assertMayChange(current.value, principal, 'application');
    assertMayGrant(principal, current.value.type, current.value.permissions);
    assertMayOutlive(principal, current.value.expires_at);
    return current;
  }

  /**
   * Rewrites the record and every key's index entry; `fresh` keys must be unused, `gone` keys are revoked. `entityId`:
   * what the request's audit entry is about (the application, or the key created or deleted).
   */
  private async replace(
    expected: number,
    record: ApplicationRecord,
    change: { fresh: StoredApplicationKey[]; gone: StoredApplicationKey[] },
    { entityId, ...options }: ChangeOptions & { entityId: string },
  ): Promise<void> {
    const txn: ChangeWrites = {
      compare: [
        { key: keys.application(record.tenant_id, record.id), modRevision: expected },
        ...keysAreFree(change.fresh),
      ],
      success: [...revokeKeys(change.gone), ...storeApplicationOps(record)],
    };
    const written = await commitChange(this.store, entityId, txn, options);
    if (!written) throw new Errors.Conflict('The application was changed by another request; retry.');
  }
}

/**
 * Permissions and rules must be ones the application type may hold; expiry must be in the future; only public
 * applications (the keys made for pages) take allowed_origins.
 */
function checkGrants(
  type: ApplicationType,
  permissions: string[],
  rules: AccessRule[],
  expiresAt?: string,
  allowedOrigins?: string[],
) {
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
  if (allowedOrigins !== undefined && type !== 'public') {
    errors.allowed_origins = ['only public applications take allowed_origins: other keys are refused from pages'];
  }
  if (Object.keys(errors).length > 0) throw new Errors.InvalidBody({ errors });
}

/** A body's allowed_origins as stored: lower case, no duplicates; nothing when it names none. */
function originsOf(body: { allowed_origins?: string[] }): Pick<ApplicationRecord, 'allowed_origins'> {
  if (body.allowed_origins === undefined) return {};
  return { allowed_origins: [...new Set(body.allowed_origins.map((origin) => origin.toLowerCase()))] };
}
