// Reactor formulas. Private formulas belong to one tenant; official ones are the operator's and every tenant sees
// them (listing returns both). Tenant keys cannot create, change or delete official formulas. A formula still used
// by reactors cannot be deleted: the 409 names them.
import { randomUUID } from 'node:crypto';
import type { TenantPrincipal } from '../../auth/principal.js';
import { actorId, OPERATOR_ACTOR_ID } from '../../auth/principal.js';
import { Errors } from '../../errors/registry.js';
import { keys } from '../../store/keys.js';
import { getRecord, getRecordAt, listRecords, type StoredAt } from '../../store/records.js';
import type { Store } from '../../store/store.js';
import { PrefixWatchedCache } from '../../store/watched-cache.js';
import { commitChange, type ChangeOptions, type ChangeWrites } from '../audited-commit.js';
import { byCreation, CreationOrder, orderDelete, orderPut } from '../creation-order.js';
import { TenantLimit, type TenantLimitsSource } from '../tenant-limits.js';
import { paginate, type Page, type PageRequest } from '../paging.js';
import { assertMayChange, chosenId, managedByOf, type ManagedBy } from '../../auth/ownership.js';
import { assertCompiles } from './code.js';
import type { ConfigurationElement, FormulaBody, RequestParameter } from './schema.js';
import { encode } from '../../store/codec.js';

export interface Formula {
  id: string;
  name: string;
  description?: string;
  type: 'official' | 'private';
  status: 'verified' | 'coming_soon';
  icon?: string;
  code: string;
  configuration: ConfigurationElement[];
  request_parameters: RequestParameter[];
  created_at: string;
  created_by: string;
  modified_at?: string;
  modified_by?: string;
  /** Private formulas only. */
  tenant_id?: string;
  /** Set when a Kubernetes object declares it; then only the operator may change it. */
  managed_by?: ManagedBy;
}

/**
 * Who is acting: a tenant key, or the operator in a tenant (private formulas of that tenant), or the operator alone
 * (official formulas).
 */
export type FormulaOwner =
  | { tenantId: string; actor: string; operator?: boolean; managedBy?: ManagedBy }
  | { operator: true; official: true; managedBy?: ManagedBy };

export function ownerOf(principal: TenantPrincipal): FormulaOwner {
  return {
    tenantId: principal.tenantId,
    actor: actorId(principal),
    operator: principal.operator,
    managedBy: managedByOf(principal),
  };
}

export function operatorOwner(managedBy?: ManagedBy): FormulaOwner {
  return { operator: true, official: true, managedBy };
}

/** A stored formula with where it is stored and its revision there (what a write referencing it compares). */
export type FormulaReference = StoredAt<Formula>;

export interface ReactorUsage {
  tenantId: string;
  reactorId: string;
}

/** Formula records kept for invocations, at most (count, and characters of code). */
const CACHED_FORMULAS = 10_000;
const CACHED_FORMULA_CHARS = 32 * 1024 * 1024;

export class FormulaService {
  /**
   * The records invocations read (`cached`): every react needs its formula, and the code may be 50,000 characters.
   * Watched per tenant (and the official prefix), so a changed formula applies at once on every replica.
   */
  private readonly records: PrefixWatchedCache<FormulaReference>;
  private readonly order: CreationOrder<Formula>;
  /** Private formulas of one tenant; official ones are the operator's and not counted. */
  private readonly limit: TenantLimit;

  constructor(
    private readonly store: Store,
    options: {
      cacheSeconds?: number;
      /** Private formulas one tenant may have, 0: no limit (TOKENVAULT_FORMULAS_PER_TENANT). */
      perTenant: number;
      /** The tenants' own limits (Tenant spec.limits): the TenantDirectory; without it, perTenant applies to all. */
      tenantLimits?: TenantLimitsSource;
    },
  ) {
    this.order = new CreationOrder(store, 'formulas', 'formula', keys.formulas, keys.formula);
    this.limit = new TenantLimit(store, 'formulas', options.perTenant, keys.formulas, options.tenantLimits);
    this.records = new PrefixWatchedCache(store, {
      max: CACHED_FORMULAS,
      maxSize: CACHED_FORMULA_CHARS,
      sizeOf: (formula) => (formula?.value.code.length ?? 0) + 1024,
      ttlSeconds: options.cacheSeconds ?? 300,
    });
  }

  async stop(): Promise<void> {
    await this.records.stop();
  }

  async create(owner: FormulaOwner, body: FormulaBody, options: ChangeOptions = {}): Promise<Formula> {
    checkBody(owner, body);
    const formula: Formula = {
      ...fields(body),
      id: chosenId(owner, body.id) ?? randomUUID(),
      created_at: new Date().toISOString(),
      created_by: 'official' in owner ? OPERATOR_ACTOR_ID : owner.actor,
      ...('official' in owner ? {} : { tenant_id: owner.tenantId }),
      ...(owner.operator && owner.managedBy ? { managed_by: owner.managedBy } : {}),
    };
    const key = storeKey(owner, formula.id);
    if (!('official' in owner)) await this.limit.assertRoomFor(owner.tenantId);
    const txn: ChangeWrites = {
      compare: [{ key, modRevision: 0 }],
      success: [
        { type: 'put', key, value: encode('formula', formula) },
        ...('official' in owner ? [] : [orderPut(owner.tenantId, 'formulas', formula)]),
      ],
    };
    const created = await commitChange(this.store, formula.id, txn, options);
    if (!created) throw new Errors.Conflict(`A reactor formula with the id ${formula.id} already exists.`);
    return formula;
  }

  async update(owner: FormulaOwner, id: string, body: FormulaBody, options: ChangeOptions = {}): Promise<Formula> {
    checkBody(owner, body);
    const current = await this.loadOwned(owner, id);
    assertMayChange(current.value, owner, 'reactor formula');
    const formula: Formula = {
      ...current.value,
      ...fields(body),
      modified_at: new Date().toISOString(),
      modified_by: 'official' in owner ? OPERATOR_ACTOR_ID : owner.actor,
    };
    const key = storeKey(owner, id);
    const txn: ChangeWrites = {
      compare: [{ key, modRevision: current.modRevision }],
      success: [{ type: 'put', key, value: encode('formula', formula) }],
    };
    if (!(await commitChange(this.store, id, txn, options))) {
      throw new Errors.Conflict('The formula was changed by another request; retry.');
    }
    return formula;
  }

  async delete(
    owner: FormulaOwner,
    id: string,
    reactorName: (usage: ReactorUsage) => Promise<string | undefined>,
    options: ChangeOptions = {},
  ): Promise<void> {
    const current = await this.loadOwned(owner, id);
    assertMayChange(current.value, owner, 'reactor formula');
    const users: string[] = [];
    for (const usage of await this.usages(id)) {
      const name = await reactorName(usage);
      if (name === undefined) await this.store.delete(keys.formulaRef(id, usage.tenantId, usage.reactorId));
      else users.push(`${name} (${usage.reactorId})`);
    }
    if (users.length > 0) {
      throw new Errors.FormulaInUse(
        `The formula is used by ${users.length} reactor${users.length === 1 ? '' : 's'}: ${users.slice(0, 20).join(', ')}. Delete them first.`,
      );
    }
    const key = storeKey(owner, id);
    const txn: ChangeWrites = {
      compare: [{ key, modRevision: current.modRevision }],
      success: [
        { type: 'delete', key },
        ...('official' in owner ? [] : [orderDelete(owner.tenantId, 'formulas', current.value)]),
      ],
    };
    const deleted = await commitChange(this.store, id, txn, options);
    if (!deleted) throw new Errors.Conflict('The formula was changed while it was being deleted; retry.');
  }

  /**
   * A formula the tenant can see: its own private one or an official one. `official` says where it was found before
   * (ids do not move between the two), so only that place is read; both are read when it is not there.
   */
  async get(tenantId: string, id: string, official?: boolean): Promise<Formula> {
    return (await this.find(tenantId, id, official, (_prefix, key) => this.read(key))).value;
  }

  /** `get` through the watched cache of formula records: what invocations read. */
  async cached(tenantId: string, id: string, official?: boolean): Promise<Formula> {
    return (await this.reference(tenantId, id, official)).value;
  }

  /**
   * A formula a write is about to reference (a new reactor), from the watched cache, with the key and revision the
   * write compares: a formula deleted or changed meanwhile, on this replica or another (whose event may not have
   * arrived yet), then fails the write instead of leaving a reactor on a formula that is gone or on a configuration it
   * no longer declares. After such a failure, read it with `fresh`.
   */
  async reference(tenantId: string, id: string, official?: boolean, fresh = false): Promise<FormulaReference> {
    return this.find(tenantId, id, official, (prefix, key) =>
      fresh ? this.read(key) : this.records.get(prefix, key, () => this.read(key)),
    );
  }

  private read(key: string): Promise<FormulaReference | undefined> {
    return getRecordAt<Formula>(this.store, 'formula', key);
  }

  private async find(
    tenantId: string,
    id: string,
    official: boolean | undefined,
    read: (prefix: string, key: string) => Promise<FormulaReference | undefined>,
  ): Promise<FormulaReference> {
    const own = () => read(keys.formulas(tenantId), keys.formula(tenantId, id));
    const shared = () => read(keys.officialFormulas, keys.officialFormula(id));
    if (official !== undefined) {
      const found = await (official ? shared() : own());
      if (found) return found;
    }
    // Both places in the same turn: the store reads them in one round trip.
    const [mine, theirs] = await Promise.all([own(), shared()]);
    const found = mine ?? theirs;
    if (!found) throw new Errors.NotFound('Reactor formula not found.');
    return found;
  }

  /**
   * Official formulas plus the tenant's private ones (or only official ones for the operator). The official ones are
   * the operator's few and are read whole; the tenant's part is read through its creation order.
   */
  async list(tenantId: string | undefined, paging: PageRequest, name?: string): Promise<Page<Formula>> {
    const official = await listRecords<Formula>(this.store, 'formula', keys.officialFormulas);
    const lowered = name?.toLowerCase();
    const keep = lowered === undefined ? undefined : (f: Formula) => f.name.toLowerCase().includes(lowered);
    if (tenantId) return this.order.list(tenantId, paging, { keep, alongside: official });
    return paginate((keep ? official.filter(keep) : official).sort(byCreation), paging);
  }

  /** The reactors that use a formula, from the reference index. */
  async usages(formulaId: string): Promise<ReactorUsage[]> {
    const prefix = keys.formulaRefs(formulaId);
    return (await this.store.range(prefix)).map((entry) => {
      const [tenantId, reactorId] = entry.key.slice(prefix.length).split('/');
      return { tenantId, reactorId };
    });
  }

  /** The operator changes official formulas, a tenant its private ones; anything else is not found or forbidden. */
  private async loadOwned(owner: FormulaOwner, id: string) {
    const found = await getRecord<Formula>(this.store, 'formula', storeKey(owner, id));
    if (found) return found;
    if (!('official' in owner) && (await this.store.get(keys.officialFormula(id)))) {
      throw new Errors.Forbidden('Official formulas are managed by the operator.');
    }
    throw new Errors.NotFound('Reactor formula not found.');
  }
}

function storeKey(owner: FormulaOwner, id: string): string {
  return 'official' in owner ? keys.officialFormula(id) : keys.formula(owner.tenantId, id);
}

function fields(body: FormulaBody) {
  return {
    name: body.name,
    description: body.description,
    type: body.type,
    status: body.status ?? 'verified',
    icon: body.icon,
    code: body.code,
    configuration: body.configuration ?? [],
    request_parameters: body.request_parameters ?? [],
  };
}

/** What a schema cannot say: who may write which type, unique names, no leaf that is also a parent, code compiles. */
function checkBody(owner: FormulaOwner, body: FormulaBody): void {
  if ('official' in owner ? body.type !== 'official' : body.type !== 'private') {
    if ('official' in owner)
      throw new Errors.InvalidBody({ errors: { type: ['the operator creates official formulas here'] } });
    throw new Errors.Forbidden('Official formulas are created by the operator; tenant keys create private formulas.');
  }
  const errors: Record<string, string[]> = {};
  const configNames = new Set<string>();
  (body.configuration ?? []).forEach((element, i) => {
    if (/[.\s]/.test(element.name))
      (errors[`configuration[${i}].name`] ??= []).push(
        'must not contain dots or spaces (nested configuration is not supported)',
      );
    if (configNames.has(element.name))
      (errors[`configuration[${i}].name`] ??= []).push(`${element.name} is declared twice`);
    configNames.add(element.name);
  });
  const parameterNames = (body.request_parameters ?? []).map((p) => p.name);
  parameterNames.forEach((name, i) => {
    const at = `request_parameters[${i}].name`;
    if (/\s/.test(name) || name.split('.').some((part) => part === ''))
      (errors[at] ??= []).push('must be names separated by single dots');
    if (parameterNames.indexOf(name) !== i) (errors[at] ??= []).push(`${name} is declared twice`);
    const parent = parameterNames.find((other) => other !== name && name.startsWith(`${other}.`));
    if (parent) (errors[at] ??= []).push(`cannot be nested under ${parent}, which is declared as a value`);
  });
  if (Object.keys(errors).length > 0) throw new Errors.InvalidBody({ errors });
  assertCompiles(body.code);
}
