// The key behind `req.bt`. Application keys are stored only as hashes, so the vault cannot hand reactor code the
// application's own key; it mints a short-lived key with the application's permissions and rules instead, on a
// lease, and reuses it while it has more than half its life left and the application's grant is unchanged. The
// minted key names the application and that grant: when the application is deleted, its key regenerated or its
// rights changed, every replica refuses the minted key as soon as the watch event arrives (see Authenticator), and
// the next invocation mints a fresh one with the new rights.
import { generateApiKey, hashKey } from '../../auth/api-keys.js';
import type { KeyIndexEntry, TenantPrincipal } from '../../auth/principal.js';
import { keys } from '../../store/keys.js';
import type { Store } from '../../store/store.js';
import { Errors } from '../../errors/registry.js';
import type { ApplicationDirectory } from '../applications/directory.js';
import { encode } from '../../store/codec.js';

const LIFETIME_SECONDS = 120;

export class BtKeys {
  private readonly minted = new Map<string, { key: string; grant: string; expiresAt: number }>();

  constructor(
    private readonly store: Store,
    private readonly applications: ApplicationDirectory,
  ) {}

  async keyFor(tenantId: string, applicationId: string): Promise<string> {
    const application = await this.usable(tenantId, applicationId);
    const cacheKey = `${tenantId}/${applicationId}`;
    const cached = this.minted.get(cacheKey);
    if (cached && cached.grant === application.grant && cached.expiresAt - Date.now() > (LIFETIME_SECONDS * 1000) / 2)
      return cached.key;

    const key = generateApiKey();
    const expiresAt = Date.now() + LIFETIME_SECONDS * 1000;
    const entry: KeyIndexEntry = {
      tenant_id: tenantId,
      kind: 'application',
      application_id: applicationId,
      application_type: application.record.type,
      permissions: application.record.permissions,
      rules: application.record.rules,
      expires_at: new Date(expiresAt).toISOString(),
      parent: { application_id: applicationId, grant: application.grant },
    };
    await this.store.put(keys.apiKey(hashKey(key)), encode('key-index', entry), { ttlSeconds: LIFETIME_SECONDS });
    this.minted.set(cacheKey, { key, grant: application.grant, expiresAt });
    return key;
  }

  /**
   * The rights a minted key of the application would have, for work done with them in this process (the tokens a
   * reactor's result asks for): no key is minted.
   */
  async principalFor(tenantId: string, applicationId: string): Promise<TenantPrincipal> {
    const { record } = await this.usable(tenantId, applicationId);
    return {
      kind: 'application',
      tenantId,
      applicationId,
      applicationType: record.type,
      permissions: new Set(record.permissions),
      rules: record.rules,
      ...(record.expires_at === undefined ? {} : { expiresAt: Date.parse(record.expires_at) }),
    };
  }

  private async usable(tenantId: string, applicationId: string) {
    const application = await this.applications.get(tenantId, applicationId);
    if (!application) throw new Errors.Conflict("The reactor's application no longer exists; update the reactor.");
    // Reactors and proxies are written with a public or private application only, but an application id can come back
    // with another type (the operator chooses ids): reactor code never gets a management key.
    if (application.record.type === 'management') {
      throw new Errors.Conflict(
        "The reactor's application is now a management application, whose key reactor code never gets; update the reactor.",
      );
    }
    return application;
  }
}
