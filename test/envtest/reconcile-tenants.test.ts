// The Tenant and Application reconcilers against a real kube-apiserver and the real API on the test etcd
// (test/support/operator.ts): objects applied as YAML with kubectl, keys read from their Secrets and used on the API.
import { afterAll, beforeAll, expect, test } from '@jest/globals';
import { Resources } from '../../src/controller/kube.js';
import { call } from '../support/http.js';
import { readyCondition, startOperatorEnv, type OperatorEnv } from '../support/operator.js';

let env: OperatorEnv;
let ns: string;

beforeAll(async () => {
  env = await startOperatorEnv();
  ns = await env.namespace('tenants');
}, 90_000);

afterAll(async () => {
  await env?.stop();
}, 30_000);

const api = (method: string, path: string, key: string, body?: unknown, headers?: Record<string, string>) =>
  call(env.api.url, method, path, { key, body, headers });
const operator = (method: string, path: string, body?: unknown) => api(method, path, env.api.operatorKey, body);

function tenantYaml(name: string, spec: Record<string, unknown>): string {
  return JSON.stringify({
    apiVersion: 'tokenvault.dev/v1alpha1',
    kind: 'Tenant',
    metadata: { name, namespace: ns },
    spec: { managementKeySecretRef: { name: `${name}-management` }, ...spec },
  });
}

function applicationYaml(name: string, spec: Record<string, unknown>): string {
  return JSON.stringify({
    apiVersion: 'tokenvault.dev/v1alpha1',
    kind: 'Application',
    metadata: { name, namespace: ns },
    spec: { keySecretRef: { name: `${name}-key` }, ...spec },
  });
}

async function eventReasons(name: string): Promise<string[]> {
  await env.manager.events.flush(10_000); // reconciles queue their Events and do not wait for them
  const events = await env.client.list<{ reason?: string; involvedObject?: { name?: string } }>(Resources.events, ns);
  return events.items.filter((e) => e.involvedObject?.name === name).map((e) => e.reason ?? '');
}

test('a Tenant becomes a vault tenant whose management key is in its Secret; edits update it; the key survives resyncs', async () => {
  await env.apply(
    tenantYaml('acme', { displayName: 'Acme', deletionPolicy: 'Delete', settings: { deduplicateTokens: true } }),
  );
  const tenant = await env.waitReady('Tenant', ns, 'acme');
  expect(tenant.status.id).toBe(tenant.metadata.uid);
  expect(readyCondition(tenant)?.reason).toBe('Reconciled');
  expect(tenant.metadata.finalizers).toContain('tokenvault.dev/finalizer');

  const key = (await env.readSecret(ns, 'acme-management'))!;
  expect(key).toMatch(/^key_/);
  const self = await api('GET', '/tenants/self', key);
  expect(self.status).toBe(200);
  expect(self.body).toMatchObject({
    id: tenant.status.id,
    name: 'Acme',
    settings: { deduplicate_tokens: 'true', fingerprint_tokens: 'true' },
  });
  expect(self.body.managed_by).toEqual({ kind: 'Tenant', namespace: ns, name: 'acme' });
  const secret = await env.client.get<any>(Resources.secrets, ns, 'acme-management');
  expect(secret.metadata.ownerReferences[0]).toMatchObject({ kind: 'Tenant', name: 'acme', uid: tenant.metadata.uid });
  // The key never shows in status or Events.
  expect(JSON.stringify(tenant.status)).not.toContain(key);
  expect(await eventReasons('acme')).toContain('Created');

  // A REST change to the managed tenant with its own key is refused, naming the object.
  const refused = await api('PUT', '/tenants/self', key, { name: 'Hijacked' });
  expect(refused.status).toBe(409);
  expect(refused.body.detail).toContain(`Tenant ${ns}/acme`);

  await env.apply(
    tenantYaml('acme', { displayName: 'Acme Corp', deletionPolicy: 'Delete', settings: { deduplicateTokens: false } }),
  );
  const edited = await env.waitFor<any>(
    'Tenant',
    ns,
    'acme',
    (t) => t?.status?.observedGeneration === 2 && readyCondition(t)?.status === 'True',
  );
  expect(edited.metadata.generation).toBe(2);
  const updated = await api('GET', '/tenants/self', key);
  expect(updated.body).toMatchObject({ name: 'Acme Corp', settings: { deduplicate_tokens: 'false' } });

  // Resyncs (every 3 s here) do not rotate the key.
  await new Promise((resolve) => setTimeout(resolve, 3_500));
  expect(await env.readSecret(ns, 'acme-management')).toBe(key);
  expect(
    (await operator('GET', '/admin/tenants?size=100')).body.data.filter((t: any) => t.id === tenant.status.id),
  ).toHaveLength(1);
}, 60_000);

test("a Tenant's spec.rateLimits become the vault tenant's own limits: a burst past them is 429 naming the spec; removing them restores the global ones", async () => {
  await env.apply(
    tenantYaml('limited', { deletionPolicy: 'Delete', rateLimits: { api: { perKey: 3 }, calls: { perTenant: 0 } } }),
  );
  const tenant = await env.waitReady('Tenant', ns, 'limited');
  const key = (await env.readSecret(ns, 'limited-management'))!;
  expect((await operator('GET', `/admin/tenants/${tenant.status.id}`)).body.rate_limits).toEqual({
    api_per_key: 3,
    calls_per_tenant: 0,
  });
  // The API's tenant directory learns of it by watch; then a burst of 8 gets at most 3 through in its window.
  await new Promise((resolve) => setTimeout(resolve, 1_100));
  const answers = await Promise.all(Array.from({ length: 8 }, () => api('GET', '/tenants/self', key)));
  const refused = answers.filter((a) => a.status === 429);
  expect(refused.length).toBeGreaterThanOrEqual(5);
  expect(refused[0].body).toMatchObject({ code: 'TV_RATE_LIMITED' });
  expect(refused[0].body.detail).toContain("the Tenant's spec.rateLimits.api.perKey");
  expect(refused[0].headers.get('retry-after')).toMatch(/^\d+$/);

  await env.apply(tenantYaml('limited', { deletionPolicy: 'Delete' }));
  await env.waitFor<any>(
    'Tenant',
    ns,
    'limited',
    (t) => t?.status?.observedGeneration === 2 && readyCondition(t)?.status === 'True',
  );
  expect((await operator('GET', `/admin/tenants/${tenant.status.id}`)).body.rate_limits).toBeUndefined();
}, 60_000);

test("a Tenant's spec.limits become the vault tenant's own record limits: its 4th token is 409 naming the spec, another tenant's is not; edits and removal follow", async () => {
  await env.apply(
    tenantYaml('small', {
      deletionPolicy: 'Delete',
      limits: { tokens: 3, reactors: 5, tokenIntents: 0, sessions: 2, webhookOutbox: 50, auditEntries: 1000 },
    }),
  );
  await env.apply(tenantYaml('roomy', { deletionPolicy: 'Delete' }));
  const tenant = await env.waitReady('Tenant', ns, 'small');
  await env.waitReady('Tenant', ns, 'roomy');
  expect((await operator('GET', `/admin/tenants/${tenant.status.id}`)).body.limits).toEqual({
    tokens: 3,
    reactors: 5,
    token_intents: 0,
    sessions: 2,
    webhook_outbox: 50,
    audit_entries: 1000,
  });
  /** A key of the Tenant `name` that may create tokens. */
  const tokenKey = async (name: string) => {
    const management = (await env.readSecret(ns, `${name}-management`))!;
    const made = await api('POST', '/applications', management, {
      name: 'writer',
      type: 'private',
      permissions: ['token:create'],
    });
    expect(made.status).toBe(201);
    return made.body.key as string;
  };
  const small = await tokenKey('small');
  const roomy = await tokenKey('roomy');
  const create = (key: string) => api('POST', '/tokens', key, { type: 'token', data: 'x' });
  for (let i = 0; i < 3; i++) expect((await create(small)).status).toBe(201);
  const refused = await create(small);
  expect(refused.status).toBe(409);
  expect(refused.body.code).toBe('TV_TOKEN_LIMIT');
  expect(refused.body.detail).toContain("the Tenant's spec.limits.tokens = 3");
  for (let i = 0; i < 4; i++) expect((await create(roomy)).status).toBe(201);

  await env.apply(tenantYaml('small', { deletionPolicy: 'Delete', limits: { tokens: 4 } }));
  await env.waitFor<any>(
    'Tenant',
    ns,
    'small',
    (t) => t?.status?.observedGeneration === 2 && readyCondition(t)?.status === 'True',
  );
  const limits = async () => (await operator('GET', `/admin/tenants/${tenant.status.id}`)).body.limits;
  expect(await limits()).toEqual({ tokens: 4 });
  expect((await create(small)).status).toBe(201);

  await env.apply(tenantYaml('small', { deletionPolicy: 'Delete' }));
  await env.waitFor<any>(
    'Tenant',
    ns,
    'small',
    (t) => t?.status?.observedGeneration === 3 && readyCondition(t)?.status === 'True',
  );
  expect(await limits()).toBeUndefined();

  await expect(env.apply(tenantYaml('small', { deletionPolicy: 'Delete', limits: { tokens: -1 } }))).rejects.toThrow(
    /spec\.limits\.tokens/,
  );
}, 60_000);

test('a lost management key is regenerated: the new one works, the old one is revoked', async () => {
  const oldKey = (await env.readSecret(ns, 'acme-management'))!;
  await env.client.delete(Resources.secrets, ns, 'acme-management');
  await env.waitFor('Secret', ns, 'acme-management', (s) => Boolean(s?.data?.key));
  const newKey = (await env.readSecret(ns, 'acme-management'))!;
  expect(newKey).not.toBe(oldKey);
  expect((await api('GET', '/tenants/self', newKey)).status).toBe(200);
  expect((await api('GET', '/tenants/self', oldKey)).status).toBe(401);
  // Regenerated, not added: still one management application.
  const apps = await api('GET', '/applications?size=100', newKey);
  expect(apps.body.data.filter((a: any) => a.type === 'management')).toHaveLength(1);
  expect(await eventReasons('acme')).toContain('KeyRegenerated');
}, 30_000);

test('an Application in a Ready tenant: its key authenticates, REST changes get 409, spec edits apply, deletion removes it', async () => {
  const managementKey = (await env.readSecret(ns, 'acme-management'))!;
  await env.apply(
    applicationYaml('backend', {
      tenantRef: { name: 'acme' },
      type: 'private',
      permissions: ['token:create', 'token:read'],
    }),
  );
  const application = await env.waitReady('Application', ns, 'backend');
  const id = application.status.id;
  expect(id).toBe(application.metadata.uid);

  const key = (await env.readSecret(ns, 'backend-key'))!;
  const self = await api('GET', '/applications/key', key);
  expect(self.status).toBe(200);
  expect(self.body).toMatchObject({
    id,
    name: 'backend',
    type: 'private',
    managed_by: { kind: 'Application', namespace: ns, name: 'backend' },
  });
  expect((await api('POST', '/tokens', key, { type: 'token', data: 'x' })).status).toBe(201);

  const refused = await api('PUT', `/applications/${id}`, managementKey, { name: 'hijacked', permissions: [] });
  expect(refused.status).toBe(409);
  expect(refused.body.detail).toContain(`Application ${ns}/backend`);
  expect((await api('DELETE', `/applications/${id}`, managementKey)).status).toBe(409);

  const rules = [
    { description: 'cards', priority: 1, container: '/pci/', transform: 'mask', permissions: ['token:read'] },
  ];
  const expiresAt = new Date(Date.now() + 86_400_000).toISOString().replace(/\.\d+Z$/, 'Z');
  await env.apply(
    applicationYaml('backend', {
      tenantRef: { name: 'acme' },
      type: 'private',
      displayName: 'Backend',
      permissions: ['token:use'],
      rules,
      expiresAt,
    }),
  );
  await env.waitFor(
    'Application',
    ns,
    'backend',
    (a) => a?.status?.observedGeneration === 2 && readyCondition(a)?.status === 'True',
  );
  const changed = await api('GET', `/applications/${id}`, managementKey);
  expect(changed.body).toMatchObject({ name: 'Backend', permissions: ['token:use'], rules });
  expect(Date.parse(changed.body.expires_at)).toBe(Date.parse(expiresAt));
  expect(await env.readSecret(ns, 'backend-key')).toBe(key); // an update keeps the key

  // A Secret deleted by a user: the key is regenerated.
  await env.client.delete(Resources.secrets, ns, 'backend-key');
  await env.waitFor('Secret', ns, 'backend-key', (s) => Boolean(s?.data?.key));
  const regenerated = (await env.readSecret(ns, 'backend-key'))!;
  expect(regenerated).not.toBe(key);
  expect((await api('GET', '/applications/key', regenerated)).status).toBe(200);
  expect((await api('GET', '/applications/key', key)).status).toBe(401);
  expect(await eventReasons('backend')).toEqual(expect.arrayContaining(['Created', 'Updated', 'KeyRegenerated']));

  await env.kubectl(['delete', 'application', 'backend', '-n', ns, '--wait=true', '--timeout=30s']);
  expect((await api('GET', `/applications/${id}`, managementKey)).status).toBe(404);
}, 60_000);

test('an Application waits for its Tenant (TenantNotFound) and becomes Ready once the Tenant is applied', async () => {
  await env.apply(
    applicationYaml('early', { tenantRef: { name: 'late' }, type: 'public', permissions: ['token:create'] }),
  );
  const waiting = await env.waitNotReady('Application', ns, 'early', 'TenantNotFound');
  expect(readyCondition(waiting)?.message).toContain(`Tenant ${ns}/late does not exist`);
  expect(await env.readSecret(ns, 'early-key')).toBeUndefined();

  await env.apply(tenantYaml('late', {}));
  const tenant = await env.waitReady('Tenant', ns, 'late');
  // Requeued by the Tenant's change (its reference), well before the 5 s retry.
  const application = await env.waitReady('Application', ns, 'early', 15_000);
  const key = (await env.readSecret(ns, 'early-key'))!;
  const self = await api('GET', '/applications/key', key);
  expect(self.body).toMatchObject({ id: application.status.id, tenant_id: tenant.status.id, type: 'public' });
}, 45_000);

test('an invalid spec the API refuses is Ready=False VaultRefused with its message; one the CRD catches is refused by kubectl', async () => {
  const past = '2020-01-01T00:00:00Z';
  await env.apply(
    applicationYaml('expired', {
      tenantRef: { name: 'acme' },
      type: 'private',
      permissions: ['token:read'],
      expiresAt: past,
    }),
  );
  const refused = await env.waitNotReady('Application', ns, 'expired', 'VaultRefused');
  expect(readyCondition(refused)?.message).toContain('expires_at must be in the future');
  expect(refused.status.id).toBeUndefined();
  expect(await eventReasons('expired')).toContain('VaultRefused');

  // Fixing the spec recovers it.
  await env.apply(
    applicationYaml('expired', { tenantRef: { name: 'acme' }, type: 'private', permissions: ['token:read'] }),
  );
  await env.waitReady('Application', ns, 'expired', 20_000);

  await expect(
    env.apply(applicationYaml('wrong', { tenantRef: { name: 'acme' }, type: 'public', permissions: ['token:read'] })),
  ).rejects.toThrow('permission token:read cannot be granted to a public application');
}, 45_000);

test('deleting a Retain tenant keeps its vault data; deleting a Delete tenant removes it', async () => {
  const retained = await env.waitReady('Tenant', ns, 'late');
  const deleted = await env.waitReady('Tenant', ns, 'acme');
  // Applications first, so every finalizer has its tenant (the Delete tenant's applications go with it anyway).
  await env.kubectl(['delete', 'applications', '--all', '-n', ns, '--wait=true', '--timeout=30s']);
  await env.kubectl(['delete', 'tenant', 'late', 'acme', '-n', ns, '--wait=true', '--timeout=30s']);

  const kept = await operator('GET', `/admin/tenants/${retained.status.id}`);
  expect(kept.status).toBe(200);
  expect(kept.body.name).toBe('late');
  expect((await operator('GET', `/admin/tenants/${deleted.status.id}`)).status).toBe(404);
  expect(await eventReasons('late')).toContain('Retained');
  expect(await eventReasons('acme')).toContain('Deleted');
}, 45_000);
