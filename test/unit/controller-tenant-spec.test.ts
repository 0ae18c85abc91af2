// What a Tenant's spec becomes in the vault tenant (desiredTenant): camelCase spec fields to the API's snake_case, only
// the fields given (an absent one keeps the global limit), and empty objects when none are, which clear the tenant's own.
import { expect, test } from '@jest/globals';
import { desiredTenant, type TenantObject } from '../../src/controller/reconcilers/tenant.js';

const tenant = (spec: Partial<TenantObject['spec']>): TenantObject => ({
  metadata: { name: 'acme', namespace: 'ns', uid: 'u' },
  spec: { managementKeySecretRef: { name: 'acme-management' }, ...spec },
});

test('spec.limits become the vault tenant limits, each kind by its API name, 0 kept', () => {
  const desired = desiredTenant(
    tenant({
      limits: {
        tokens: 3_000_000,
        tokenIntents: 0,
        reactors: 5,
        applications: 6,
        proxies: 7,
        formulas: 8,
        sessions: 9,
        idempotencyKeys: 10,
        asyncResults: 11,
        webhookOutbox: 12,
        auditEntries: 13,
      },
    }),
  );
  expect(desired.limits).toEqual({
    tokens: 3_000_000,
    token_intents: 0,
    reactors: 5,
    applications: 6,
    proxies: 7,
    formulas: 8,
    sessions: 9,
    idempotency_keys: 10,
    async_results: 11,
    webhook_outbox: 12,
    audit_entries: 13,
  });
  expect(desiredTenant(tenant({ limits: { tokens: 3 } })).limits).toEqual({ tokens: 3 });
});

test('without spec.limits (or spec.rateLimits) the desired objects are empty, which clears them in the vault', () => {
  const desired = desiredTenant(tenant({}));
  expect(desired.limits).toEqual({});
  expect(desired.rate_limits).toEqual({});
  expect(desiredTenant(tenant({ limits: {} })).limits).toEqual({});
});
