// How many reactors, applications, proxies and private formulas one tenant may have (TOKENVAULT_REACTORS_PER_TENANT
// and the others; 0: no limit). Besides storage, the bound is on what one tenant's requests cost everyone: a list
// filtered by name or type reads every record of the kind on the API's one event loop, so without it one tenant's
// 10,000 reactors make its filtered lists slow down all tenants.
//
// A create counts the tenant's records of the kind (a count-only range: no keys or values are sent) before its
// transaction. Not exact: creates in flight at the same moment all count before any of them is written, so together
// they can pass the limit by as many as run at once. An exact limit would need one guard key per tenant and kind that
// every create rewrites (as client keys do), which serialises a tenant's creates, and the controller creates thousands
// at once when manifests are applied.
import type { PerTenantLimits } from '../config/config.js';
import { Errors, type VaultErrorClass } from '../errors/registry.js';
import type { Store } from '../store/store.js';

export type LimitedKind = keyof PerTenantLimits;

const LIMITS: Record<LimitedKind, { error: VaultErrorClass; setting: string; noun: string }> = {
  reactors: { error: Errors.ReactorLimit, setting: 'TOKENVAULT_REACTORS_PER_TENANT', noun: 'reactors' },
  applications: { error: Errors.ApplicationLimit, setting: 'TOKENVAULT_APPLICATIONS_PER_TENANT', noun: 'applications' },
  proxies: { error: Errors.ProxyLimit, setting: 'TOKENVAULT_PROXIES_PER_TENANT', noun: 'proxies' },
  formulas: {
    error: Errors.FormulaLimit,
    setting: 'TOKENVAULT_FORMULAS_PER_TENANT',
    noun: 'private reactor formulas',
  },
};

export class TenantLimit {
  constructor(
    private readonly store: Store,
    private readonly kind: LimitedKind,
    /** Records of the kind one tenant may have; 0: no limit. */
    private readonly max: number,
    /** The prefix of the tenant's records of the kind (and of nothing else). */
    private readonly records: (tenantId: string) => string,
  ) {}

  /** Throws the kind's 409, naming the setting and its value, when the tenant already has `max` records. */
  async assertRoomFor(tenantId: string): Promise<void> {
    if (this.max === 0) return;
    const count = await this.store.count(this.records(tenantId));
    if (count < this.max) return;
    const { error, setting, noun } = LIMITS[this.kind];
    throw new error(
      `The tenant has ${count} ${noun}, as many as allowed (${setting} = ${this.max}); delete one first.`,
    );
  }
}
