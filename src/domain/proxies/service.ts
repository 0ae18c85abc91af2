// Pre-configured proxies: a destination, optional request and response transforms, an optional application (whose
// key the transforms get as `bt`), configuration (encrypted at rest) and `require_auth`. Each proxy has a generated
// key (`key_` + base58 of 192 random bits); the key is kept sealed in the record, so it can be shown to holders of
// proxy:read as the platform does, and indexed by its SHA-256 globally, so /proxy can find the proxy from the key
// alone. Resolving a key is cached per process; every change rewrites the index entry, and a watch on the index
// evicts the cached proxy on every replica.
import { randomUUID } from 'node:crypto';
import { generateApiKey, hashKey, isApiKey } from '../../auth/api-keys.js';
import { actorId, type TenantPrincipal } from '../../auth/principal.js';
import { Errors, VaultError } from '../../errors/registry.js';
import { keys } from '../../store/keys.js';
import { getRecord } from '../../store/records.js';
import type { Store } from '../../store/store.js';
import { WatchedCache } from '../../store/watched-cache.js';
import { assertMayAttach, assertMayDelegate, assertMayRedirect, changedFields } from '../applications/delegation.js';
import { mergePatch } from '../merge-patch.js';
import type { ApplicationRecord } from '../applications/service.js';
import { assertCompiles, codeHash } from '../formulas/code.js';
import { commitChange, type ChangeOptions, type ChangeWrites } from '../audited-commit.js';
import { CreationOrder, orderDelete, orderPut } from '../creation-order.js';
import { TenantLimit } from '../tenant-limits.js';
import type { Page, PageRequest } from '../paging.js';
import type { TenantDirectory } from '../tenants/directory.js';
import type { DataCipher } from '../tokens/records.js';
import { validateUpdateProxy, type ProxyBody, type ProxyPatch, type ProxyTransformBody } from './schema.js';
import { assertMayChange, chosenId, managedByOf, type ManagedBy } from '../../auth/ownership.js';
import { encode, decode } from '../../store/codec.js';

interface ProxyRecord {
  id: string;
  tenant_id: string;
  name: string;
  destination_url: string;
  /** SHA-256 (hex) of the proxy key: its index entry's name. */
  key_hash: string;
  /** The proxy key, encrypted with the tenant's data key. */
  sealed_key: string;
  /** The configuration, encrypted with the tenant's data key. */
  sealed_configuration: string;
  request_transform?: ProxyTransformBody;
  response_transform?: ProxyTransformBody;
  application_id?: string;
  require_auth: boolean;
  /** Set when a Kubernetes Proxy object declares it; then only the operator may change it. */
  managed_by?: ManagedBy;
  created_at: string;
  created_by: string;
  modified_at?: string;
  modified_by?: string;
}

interface ProxyKeyEntry {
  tenant_id: string;
  proxy_id: string;
  /** Changes with every write of the proxy, so each write is an event for the watchers. */
  revision: string;
}

/** The proxy as the API answers with it. */
export interface Proxy {
  id: string;
  key?: string;
  tenant_id: string;
  name: string;
  destination_url: string;
  request_transform?: ProxyTransformBody;
  response_transform?: ProxyTransformBody;
  application?: { id: string };
  /** The same id as application.id, as the platform's clients read it. */
  application_id?: string;
  configuration: Record<string, string>;
  require_auth: boolean;
  created_at: string;
  created_by: string;
  modified_at?: string;
  modified_by?: string;
}

export interface ResolvedTransform {
  code: string;
  hash: string;
}

/** What /proxy needs of a pre-configured proxy. */
export interface ResolvedProxy {
  id: string;
  tenantId: string;
  destination: URL;
  requireAuth: boolean;
  configuration: Record<string, string>;
  applicationId?: string;
  requestTransform?: ResolvedTransform;
  responseTransform?: ResolvedTransform;
}

export interface ProxyServiceOptions {
  /** Checks a destination URL (https, DNS host name, no user info): the destination policy's checkUrl. */
  checkUrl: (url: string) => URL;
  /** Idle lifetime of a cached key resolution; watches evict changed proxies at once. */
  cacheSeconds: number;
  /** Proxies one tenant may have, 0: no limit (TOKENVAULT_PROXIES_PER_TENANT). */
  perTenant: number;
}

export class ProxyService {
  /** Key resolutions by key hash; every write of a proxy rewrites its index entry, which the watch sees. */
  private readonly cache: WatchedCache<ResolvedProxy>;
  private readonly order: CreationOrder<ProxyRecord>;
  private readonly limit: TenantLimit;

  constructor(
    private readonly store: Store,
    private readonly cipher: DataCipher,
    private readonly tenants: TenantDirectory,
    private readonly options: ProxyServiceOptions,
  ) {
    this.cache = new WatchedCache(store, keys.proxyKeys, { max: 10_000, ttlSeconds: options.cacheSeconds });
    this.order = new CreationOrder(store, 'proxies', 'proxy', keys.proxies, keys.proxy);
    this.limit = new TenantLimit(store, 'proxies', options.perTenant, keys.proxies, tenants);
  }

  start(): Promise<void> {
    return this.cache.start();
  }

  stop(): Promise<void> {
    return this.cache.stop();
  }

  async create(
    principal: TenantPrincipal,
    body: ProxyBody & { id?: string },
    options: ChangeOptions = {},
  ): Promise<Proxy> {
    const tenantId = principal.tenantId;
    const { id: givenId, ...rest } = body;
    assertMayDelegate(principal, rest.application?.id, 'proxy');
    const { configuration, ...fields } = await this.check(principal, rest);
    const id = chosenId(principal, givenId) ?? randomUUID();
    const managedBy = managedByOf(principal);
    const key = generateApiKey();
    const record: ProxyRecord = {
      id,
      tenant_id: tenantId,
      ...fields,
      key_hash: hashKey(key),
      sealed_key: await this.cipher.encrypt(tenantId, keyAad(tenantId, id), key),
      sealed_configuration: await this.sealConfiguration(tenantId, id, configuration),
      ...(managedBy ? { managed_by: managedBy } : {}),
      created_at: new Date().toISOString(),
      created_by: actorId(principal),
    };
    const [existing] = await Promise.all([
      this.store.get(keys.proxy(tenantId, id)),
      this.limit.assertRoomFor(tenantId),
    ]);
    if (existing) throw new Errors.Conflict(`A proxy with the id ${id} already exists.`);
    const txn: ChangeWrites = {
      compare: [
        { key: keys.proxyKey(record.key_hash), modRevision: 0 },
        { key: keys.proxy(tenantId, id), modRevision: 0 },
      ],
      success: [
        { type: 'put', key: keys.proxy(tenantId, id), value: encode('proxy', toStored(record)) },
        { type: 'put', key: keys.proxyKey(record.key_hash), value: indexEntry(record) },
        orderPut(tenantId, 'proxies', record),
      ],
    };
    const written = await commitChange(this.store, id, txn, options);
    if (!written) throw new Errors.Conflict('A generated proxy key collided; retry.');
    return this.toProxy(record, { withKey: true });
  }

  async get(principal: TenantPrincipal, id: string): Promise<Proxy> {
    const { value } = await this.load(principal.tenantId, id);
    return this.toProxy(value, { withKey: mayReadKey(principal) });
  }

  async list(
    principal: TenantPrincipal,
    paging: PageRequest,
    filter: { ids?: string[]; name?: string },
  ): Promise<Page<Proxy>> {
    const name = filter.name?.toLowerCase();
    const page = await this.order.list(principal.tenantId, paging, {
      ids: filter.ids?.map((id) => id.toLowerCase()),
      keep: name === undefined ? undefined : (r) => r.name.toLowerCase().includes(name),
    });
    const withKey = mayReadKey(principal);
    return { ...page, data: await Promise.all(page.data.map((r) => this.toProxy(r, { withKey }))) };
  }

  /** PUT: everything but the key is replaced; optional fields left out are cleared (require_auth back to true). */
  async update(principal: TenantPrincipal, id: string, body: ProxyBody, options: ChangeOptions = {}): Promise<Proxy> {
    return this.replace(principal, id, () => body, options);
  }

  /** JSON merge patch (RFC 7396): present fields replace, null clears; configuration merges name by name. */
  async patch(principal: TenantPrincipal, id: string, patch: ProxyPatch, options: ChangeOptions = {}): Promise<Proxy> {
    return this.replace(
      principal,
      id,
      (current, configuration) => {
        const merged: ProxyBody = {
          name: patch.name ?? current.name,
          destination_url: patch.destination_url ?? current.destination_url,
          request_transform: 'request_transform' in patch ? patch.request_transform : current.request_transform,
          response_transform: 'response_transform' in patch ? patch.response_transform : current.response_transform,
          application:
            'application' in patch ? patch.application : current.application_id ? { id: current.application_id } : null,
          require_auth: patch.require_auth ?? current.require_auth,
          configuration: configuration,
        };
        if (patch.configuration === null) merged.configuration = {};
        else if (patch.configuration !== undefined)
          merged.configuration = mergePatch(configuration, patch.configuration) as Record<string, string>;
        // What a patch makes is held to what a PUT accepts: patches of 100 names each merged past the 100 a body may hold.
        return validateUpdateProxy(merged);
      },
      options,
    );
  }

  async delete(principal: TenantPrincipal, id: string, options: ChangeOptions = {}): Promise<void> {
    const tenantId = principal.tenantId;
    const current = await this.load(tenantId, id);
    assertMayChange(current.value, principal, 'proxy');
    const txn: ChangeWrites = {
      compare: [{ key: keys.proxy(tenantId, id), modRevision: current.modRevision }],
      success: [
        { type: 'delete', key: keys.proxy(tenantId, id) },
        { type: 'delete', key: keys.proxyKey(current.value.key_hash) },
        orderDelete(tenantId, 'proxies', current.value),
      ],
    };
    const deleted = await commitChange(this.store, id, txn, options);
    if (!deleted) throw new Errors.Conflict('The proxy was changed while it was being deleted; retry.');
  }

  /**
   * The proxy a key names, or undefined for a key that names none (never issued, deleted, or its tenant is gone).
   * Cached; a change to the proxy or its tenant is seen at once through the watches.
   */
  async resolve(key: string): Promise<ResolvedProxy | undefined> {
    if (!isApiKey(key)) return undefined;
    const hash = hashKey(key);
    const resolved = await this.cache.get(hash, () => this.lookup(hash));
    // The tenant is checked on every use (the directory is cached and watched): a deleted tenant's proxies stop.
    if (resolved && (await this.tenants.get(resolved.tenantId)) === undefined) return undefined;
    return resolved;
  }

  private async lookup(hash: string): Promise<ResolvedProxy | undefined> {
    const index = await this.store.get(keys.proxyKey(hash));
    if (!index) return undefined;
    const entry = decode<ProxyKeyEntry>('proxy-key', index.value);
    const found = await getRecord<ProxyRecord>(this.store, 'proxy', keys.proxy(entry.tenant_id, entry.proxy_id));
    if (!found || found.value.key_hash !== hash) {
      // Left behind by a deleted tenant (its data went with one prefix delete): drop the stale entry.
      await this.store.compareAndDelete(keys.proxyKey(hash), index.modRevision);
      return undefined;
    }
    const record = found.value;
    const transform = (t?: ProxyTransformBody) => (t ? { code: t.code, hash: codeHash(t.code) } : undefined);
    const proxy: ResolvedProxy = {
      id: record.id,
      tenantId: record.tenant_id,
      destination: new URL(record.destination_url),
      requireAuth: record.require_auth,
      configuration: await this.openConfiguration(record),
      applicationId: record.application_id,
      requestTransform: transform(record.request_transform),
      responseTransform: transform(record.response_transform),
    };
    return proxy;
  }

  private async replace(
    principal: TenantPrincipal,
    id: string,
    next: (current: ProxyRecord, configuration: Record<string, string>) => ProxyBody,
    options: ChangeOptions,
  ): Promise<Proxy> {
    const tenantId = principal.tenantId;
    const current = await this.load(tenantId, id);
    assertMayChange(current.value, principal, 'proxy');
    const before = { ...current.value, configuration: await this.openConfiguration(current.value) };
    const body = next(current.value, before.configuration);
    assertMayDelegate(principal, body.application?.id, 'proxy');
    const checked = await this.check(principal, body);
    const redirecting = ['destination_url', 'request_transform', 'response_transform', 'configuration'] as const;
    assertMayRedirect(principal, changedFields(before, checked, redirecting), 'proxy');
    const { configuration, ...fields } = checked;
    const record: ProxyRecord = {
      ...current.value,
      ...fields,
      sealed_configuration: await this.sealConfiguration(tenantId, id, configuration),
      modified_at: new Date().toISOString(),
      modified_by: actorId(principal),
    };
    const txn: ChangeWrites = {
      compare: [{ key: keys.proxy(tenantId, id), modRevision: current.modRevision }],
      success: [
        { type: 'put', key: keys.proxy(tenantId, id), value: encode('proxy', toStored(record)) },
        { type: 'put', key: keys.proxyKey(record.key_hash), value: indexEntry(record) },
      ],
    };
    const written = await commitChange(this.store, id, txn, options);
    if (!written) throw new Errors.Conflict('The proxy was changed by another request; retry.');
    return this.toProxy(record, { withKey: mayReadKey(principal) });
  }

  /** Validates what the schema cannot: the URL, the application, and transform code that compiles. */
  private async check(principal: TenantPrincipal, body: ProxyBody) {
    const errors: Record<string, string[]> = {};
    let destination = body.destination_url;
    try {
      destination = this.options.checkUrl(body.destination_url).href;
    } catch (error) {
      if (!(error instanceof VaultError)) throw error;
      errors.destination_url = [error.detail];
    }
    if (body.application) {
      const application = await getRecord<ApplicationRecord>(
        this.store,
        'application',
        keys.application(principal.tenantId, body.application.id.toLowerCase()),
      );
      if (!application) errors['application.id'] = ['no such application'];
      else if (application.value.type === 'management')
        errors['application.id'] = ['must be a public or private application'];
      else assertMayAttach(principal, application.value, 'proxy');
    }
    if (Object.keys(errors).length > 0) throw new Errors.InvalidBody({ errors });
    if (body.request_transform) assertCompiles(body.request_transform.code, 'request_transform.code');
    if (body.response_transform) assertCompiles(body.response_transform.code, 'response_transform.code');
    return {
      name: body.name,
      destination_url: destination,
      request_transform: body.request_transform ? { code: body.request_transform.code } : undefined,
      response_transform: body.response_transform ? { code: body.response_transform.code } : undefined,
      application_id: body.application ? body.application.id.toLowerCase() : undefined,
      require_auth: body.require_auth ?? true,
      configuration: body.configuration ?? {},
    };
  }

  private async load(tenantId: string, id: string) {
    const found = await getRecord<ProxyRecord>(this.store, 'proxy', keys.proxy(tenantId, id));
    if (!found) throw new Errors.NotFound('Proxy not found.');
    return found;
  }

  private async sealConfiguration(
    tenantId: string,
    id: string,
    configuration: Record<string, string>,
  ): Promise<string> {
    return this.cipher.encrypt(tenantId, `proxy:${tenantId}:${id}`, JSON.stringify(configuration));
  }

  private async openConfiguration(record: ProxyRecord): Promise<Record<string, string>> {
    const plaintext = await this.cipher.decrypt(
      record.tenant_id,
      `proxy:${record.tenant_id}:${record.id}`,
      record.sealed_configuration,
    );
    return JSON.parse(plaintext.toString('utf8')) as Record<string, string>;
  }

  private async toProxy(record: ProxyRecord, options: { withKey: boolean }): Promise<Proxy> {
    const key = options.withKey
      ? (await this.cipher.decrypt(record.tenant_id, keyAad(record.tenant_id, record.id), record.sealed_key)).toString(
          'utf8',
        )
      : undefined;
    return {
      id: record.id,
      ...(key !== undefined ? { key } : {}),
      tenant_id: record.tenant_id,
      name: record.name,
      destination_url: record.destination_url,
      ...(record.request_transform ? { request_transform: record.request_transform } : {}),
      ...(record.response_transform ? { response_transform: record.response_transform } : {}),
      ...(record.application_id
        ? { application: { id: record.application_id }, application_id: record.application_id }
        : {}),
      configuration: await this.openConfiguration(record),
      require_auth: record.require_auth,
      created_at: record.created_at,
      created_by: record.created_by,
      ...(record.modified_at ? { modified_at: record.modified_at, modified_by: record.modified_by } : {}),
    };
  }
}

/** The key is shown to keys that may read proxies (and always in the answer to its creation). */
function mayReadKey(principal: TenantPrincipal): boolean {
  return principal.permissions.has('proxy:read');
}

function keyAad(tenantId: string, id: string): string {
  return `proxy-key:${tenantId}:${id}`;
}

function indexEntry(record: ProxyRecord): string {
  return encode('proxy-key', {
    tenant_id: record.tenant_id,
    proxy_id: record.id,
    revision: randomUUID(),
  } satisfies ProxyKeyEntry);
}

/** The record as stored: optional fields that are unset are left out. */
function toStored(record: ProxyRecord): ProxyRecord {
  const stored = { ...record };
  for (const field of ['request_transform', 'response_transform', 'application_id', 'managed_by'] as const) {
    if (stored[field] === undefined) delete stored[field];
  }
  return stored;
}
