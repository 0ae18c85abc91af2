// The key behind `req.bt`. Application keys are stored only as hashes, so the vault cannot hand reactor code the
// application's own key; it mints a short-lived key with the application's permissions and rules instead, on a
// lease, and reuses it while it has more than half its life left. A permission change reaches such a key within
// its lifetime (two minutes).
import { generateApiKey, hashKey } from '../../auth/api-keys.js';
import type { KeyIndexEntry } from '../../auth/principal.js';
import { keys } from '../../store/keys.js';
import { getRecord } from '../../store/records.js';
import type { Store } from '../../store/store.js';
import { Errors } from '../../errors/registry.js';
import type { ApplicationRecord } from '../applications/service.js';

const LIFETIME_SECONDS = 120;

export class BtKeys {
  private readonly minted = new Map<string, { key: string; expiresAt: number }>();

  constructor(private readonly store: Store) {}

  async keyFor(tenantId: string, applicationId: string): Promise<string> {
    const cacheKey = `${tenantId}/${applicationId}`;
    const cached = this.minted.get(cacheKey);
    if (cached && cached.expiresAt - Date.now() > (LIFETIME_SECONDS * 1000) / 2) return cached.key;

    const application = await getRecord<ApplicationRecord>(this.store, keys.application(tenantId, applicationId));
    if (!application) throw new Errors.Conflict("The reactor's application no longer exists; update the reactor.");
    const key = generateApiKey();
    const expiresAt = Date.now() + LIFETIME_SECONDS * 1000;
    const entry: KeyIndexEntry = {
      tenant_id: tenantId,
      kind: 'application',
      application_id: applicationId,
      application_type: application.value.type,
      permissions: application.value.permissions,
      rules: application.value.rules,
      expires_at: new Date(expiresAt).toISOString(),
    };
    await this.store.put(keys.apiKey(hashKey(key)), JSON.stringify(entry), { ttlSeconds: LIFETIME_SECONDS });
    this.minted.set(cacheKey, { key, expiresAt });
    return key;
  }
}
