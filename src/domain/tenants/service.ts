// Tenants. A tenant owns everything under its prefix. The operator creates a tenant together with its first
// management application (one transaction), and deletes it in steps that survive a crash: the record is first
// marked `deleting` (every key of the tenant stops authenticating at once), then its key-index entries and data
// are removed (the data in pieces of TENANT_DELETE_PIECE_KEYS keys), and the record goes last, so a repeated delete
// finishes what an interrupted one started.
import { randomUUID } from 'node:crypto';
import { OPERATOR_ACTOR_ID } from '../../auth/principal.js';
import { Errors } from '../../errors/registry.js';
import { keys } from '../../store/keys.js';
import { getRecord, listRecords } from '../../store/records.js';
import type { Store } from '../../store/store.js';
import {
  createApplicationOps,
  toApplication,
  type Application,
  type ApplicationRecord,
  type ApplicationService,
} from '../applications/service.js';
import { paginate, type Page, type PageRequest } from '../paging.js';
import { MANAGEMENT_DEFAULT } from '../../auth/permissions.js';
import type { UsageReport, UsageService } from '../usage/service.js';
import { assertMayChange, type ManagedBy } from '../../auth/ownership.js';
import type {
  AdminUpdateTenantBody,
  CreateTenantBody,
  TenantRateLimits,
  TenantRecordLimits,
  TenantRuntime,
  TenantSettings,
} from './schema.js';
import { encode } from '../../store/codec.js';
import type { WorkerUrlAllowList } from '../../runtime/client/worker-urls.js';

export interface TenantRecord {
  id: string;
  owner_id: string;
  name: string;
  settings: TenantSettings;
  created_at: string;
  created_by: string;
  modified_at?: string;
  modified_by?: string;
  /** Set while a delete is in progress; such a tenant is invisible and authenticates nobody. */
  deleting?: boolean;
  /** Set when a Kubernetes Tenant object declares it; then tenant keys cannot change or delete it. */
  managed_by?: ManagedBy;
  /** The tenant's dedicated workers (Tenant spec.runtime.dedicated); absent: the shared workers. Operator only. */
  runtime?: TenantRuntime;
  /** The tenant's own request rate limits (Tenant spec.rateLimits); absent: the global ones. Operator only. */
  rate_limits?: TenantRateLimits;
  /** The tenant's own record limits (Tenant spec.limits); absent: the global ones. Operator only. */
  limits?: TenantRecordLimits;
}

export type Tenant = Omit<TenantRecord, 'deleting'>;

export type { UsageReport };

export const DEFAULT_SETTINGS: TenantSettings = { deduplicate_tokens: 'false', fingerprint_tokens: 'true' };

/** How many keys one transaction deletes while a tenant is removed (etcd allows 128 operations per txn). */
const DELETE_BATCH = 100;

/**
 * At most this many of a tenant's keys go in one etcd delete while it is removed. etcd applies one write at a time,
 * so every tenant's writes wait for each delete: 1,000 keys take it about 10 ms (140,000 keys in one delete took
 * 0.9-1.8 s). Measured without the pauses between steps at 20,000 tokens: pieces of 4,000 keys made another tenant's
 * median write 24 ms against 8-10 ms, pieces of 250 made the deletion 8.8 s against 5-16 s (docs/security.md).
 */
export const TENANT_DELETE_PIECE_KEYS = 1_000;

export class TenantService {
  /**
   * The deletions this process is running, by tenant. A large tenant takes longer to delete than the controller waits
   * for an answer (15 s), and the controller then asks again: the repeated delete waits for the running one here
   * instead of walking the same keys beside it.
   */
  private readonly removing = new Map<string, Promise<void>>();

  constructor(
    private readonly store: Store,
    private readonly applications: ApplicationService,
    private readonly usageService: UsageService,
    /** TOKENVAULT_DEDICATED_WORKER_URLS: the only worker URLs the operator may give a tenant. */
    private readonly workerUrls: WorkerUrlAllowList,
  ) {}

  /** Operator: a tenant and its first management application, whose key is returned once. */
  async create(
    body: CreateTenantBody,
    managementKey?: string,
    managedBy?: ManagedBy,
  ): Promise<{ tenant: Tenant; application: Application }> {
    const now = new Date().toISOString();
    const tenant: TenantRecord = {
      id: body.id ?? randomUUID(),
      owner_id: body.owner_id ?? OPERATOR_ACTOR_ID,
      name: body.name,
      settings: { ...DEFAULT_SETTINGS, ...body.settings },
      created_at: now,
      created_by: OPERATOR_ACTOR_ID,
      ...(managedBy ? { managed_by: managedBy } : {}),
      ...(body.rate_limits && Object.keys(body.rate_limits).length > 0 ? { rate_limits: body.rate_limits } : {}),
      ...(body.limits && Object.keys(body.limits).length > 0 ? { limits: body.limits } : {}),
    };
    const { record, key } = this.applications.prepare(
      tenant.id,
      OPERATOR_ACTOR_ID,
      {
        name: body.management_application_name ?? `${body.name} management`,
        type: 'management',
        permissions: MANAGEMENT_DEFAULT,
      },
      managementKey,
      managedBy,
    );
    const created = await this.store.txn({
      compare: [
        { key: keys.tenant(tenant.id), modRevision: 0 },
        { key: keys.apiKey(record.keys[0].key_hash), modRevision: 0 },
      ],
      success: [
        { type: 'put', key: keys.tenant(tenant.id), value: encode('tenant', tenant) },
        ...createApplicationOps(record),
      ],
    });
    if (!created) throw new Errors.Conflict(`A tenant with id ${tenant.id} already exists.`);
    return { tenant, application: toApplication(record, key) };
  }

  async list(paging: PageRequest): Promise<Page<Tenant>> {
    const records = (await listRecords<TenantRecord>(this.store, 'tenant', keys.tenants)).filter((t) => !t.deleting);
    records.sort((a, b) => a.created_at.localeCompare(b.created_at) || a.id.localeCompare(b.id));
    return paginate(records, paging);
  }

  async get(id: string): Promise<Tenant> {
    return (await this.load(id)).value;
  }

  /** Name and settings; `runtime` (operator only: the route of tenant keys refuses it) is kept when absent, cleared by null. */
  async update(
    id: string,
    actor: string,
    body: AdminUpdateTenantBody,
    caller: { operator?: boolean } = { operator: true },
  ): Promise<Tenant> {
    const workerUrl = body.runtime?.worker_url.replace(/\/+$/, '');
    if (workerUrl !== undefined && !this.workerUrls.allows(workerUrl)) {
      throw new Errors.WorkerUrlNotAllowed({
        errors: {
          'runtime.worker_url': [
            'is not an allowed dedicated worker URL: add it to TOKENVAULT_DEDICATED_WORKER_URLS, or leave runtime out',
          ],
        },
      });
    }
    const current = await this.load(id);
    assertMayChange(current.value, caller, 'tenant');
    const tenant: TenantRecord = {
      ...current.value,
      name: body.name,
      settings: { ...current.value.settings, ...body.settings },
      modified_at: new Date().toISOString(),
      modified_by: actor,
    };
    if (body.runtime === null) delete tenant.runtime;
    else if (workerUrl !== undefined) tenant.runtime = { worker_url: workerUrl };
    if (body.rate_limits === null || (body.rate_limits !== undefined && Object.keys(body.rate_limits).length === 0))
      delete tenant.rate_limits;
    else if (body.rate_limits !== undefined) tenant.rate_limits = body.rate_limits;
    if (body.limits === null || (body.limits !== undefined && Object.keys(body.limits).length === 0))
      delete tenant.limits;
    else if (body.limits !== undefined) tenant.limits = body.limits;
    const written = await this.store.compareAndSwap(keys.tenant(id), current.modRevision, encode('tenant', tenant));
    if (!written) throw new Errors.Conflict('The tenant was changed by another request; retry.');
    return tenant;
  }

  async usage(id: string): Promise<UsageReport> {
    await this.load(id);
    return this.usageService.report(id);
  }

  /** Deletes the tenant, its keys and all its data. Safe to repeat after an interruption. */
  async delete(id: string, caller: { operator?: boolean } = { operator: true }): Promise<void> {
    const found = await getRecord<TenantRecord>(this.store, 'tenant', keys.tenant(id));
    if (!found) throw new Errors.NotFound('Tenant not found.');
    assertMayChange(found.value, caller, 'tenant');
    if (!found.value.deleting) {
      const marked = await this.store.compareAndSwap(
        keys.tenant(id),
        found.modRevision,
        encode('tenant', { ...found.value, deleting: true }),
      );
      if (!marked) throw new Errors.Conflict('The tenant was changed by another request; retry.');
    }
    let removal = this.removing.get(id);
    if (!removal) {
      removal = this.remove(id).finally(() => this.removing.delete(id));
      this.removing.set(id, removal);
    }
    await removal;
  }

  /** Removes a tenant marked deleting: its keys, its data, its webhook deliveries, and last its record. */
  private async remove(id: string): Promise<void> {
    const keyHashes = [
      ...(await listRecords<ApplicationRecord>(this.store, 'application', keys.applications(id))).flatMap((a) =>
        a.keys.map((k) => k.key_hash),
      ),
      ...(await listRecords<{ key_hash: string }>(this.store, 'session', keys.sessions(id))).map((s) => s.key_hash),
    ];
    for (let i = 0; i < keyHashes.length; i += DELETE_BATCH) {
      const batch = keyHashes.slice(i, i + DELETE_BATCH);
      await this.store.txn({ success: batch.map((hash) => ({ type: 'delete' as const, key: keys.apiKey(hash) })) });
    }
    // In pieces: one delete of a large tenant's data would stall every other tenant's writes while etcd applies it.
    await this.store.deletePrefixInPieces(keys.tenantData(id), TENANT_DELETE_PIECE_KEYS);
    // Its webhook deliveries (outside its prefix: the dispatcher serves every tenant) and its outbox's mark, together,
    // so that no entry is left without the mark that leads the dispatcher to it.
    await this.store.txn({
      success: [
        { type: 'deletePrefix', prefix: keys.webhookQueue(id) },
        { type: 'delete', key: keys.webhookQueuedTenant(id) },
      ],
    });
    await this.store.delete(keys.tenant(id));
  }

  private async load(id: string) {
    const found = await getRecord<TenantRecord>(this.store, 'tenant', keys.tenant(id));
    if (!found || found.value.deleting) throw new Errors.NotFound('Tenant not found.');
    return found;
  }
}
