// Zero-downtime key rotation of an Application (src/controller/reconcilers/key-rotation.ts) against a real
// kube-apiserver and the real API: the annotation tokenvault.dev/rotate-key makes the controller create a new key and
// write it into the Secret; the previous key keeps working for spec.keyRotation.gracePeriod, then is deleted and
// refused; status.key and the KeyRotated condition tell the story. The CRD refuses bad durations.
import { afterAll, beforeAll, expect, jest, test } from '@jest/globals';
import { call } from '../support/http.js';
import { startOperatorEnv, type OperatorEnv, tenantYaml } from '../support/operator.js';

let env: OperatorEnv;
let ns: string;

const GRACE_SECONDS = 4;

const applicationYaml = (annotation?: string, keyRotation = `{gracePeriod: ${GRACE_SECONDS}s}`) => `
apiVersion: tokenvault.dev/v1alpha1
kind: Application
metadata:
  name: rotating
  namespace: ${ns}
${annotation ? `  annotations: {tokenvault.dev/rotate-key: "${annotation}"}` : ''}
spec:
  tenantRef: {name: acme}
  type: private
  permissions: [token:create]
  keySecretRef: {name: rotating-key}
  keyRotation: ${keyRotation}
`;

const whoAmI = (key: string) => call(env.api.url, 'GET', '/applications/key', { key });

beforeAll(async () => {
  env = await startOperatorEnv({ resyncMs: 120_000 }); // the rotation must follow the annotation, not a resync
  ns = await env.namespace('rotation');
  await env.apply(`
${tenantYaml(ns)}
---
${applicationYaml()}
`);
  await env.waitReady('Tenant', ns, 'acme');
}, 120_000);

afterAll(async () => {
  await env?.stop();
}, 60_000);

jest.setTimeout(90_000);

test('the rotate-key annotation rotates the key: the Secret changes, the old key works during the grace period, then is refused', async () => {
  const app = await env.waitFor('Application', ns, 'rotating', (o) =>
    Boolean(o?.status?.key?.id && o.status.conditions?.some((c: { type: string }) => c.type === 'KeyRotated')),
  );
  expect(app.status.conditions.find((c: { type: string }) => c.type === 'KeyRotated')).toMatchObject({
    status: 'True',
    reason: 'Current',
  });
  const firstKeyId = app.status.key.id as string;
  const oldKey = (await env.readSecret(ns, 'rotating-key'))!;
  expect((await whoAmI(oldKey)).body.id).toBe(app.status.id);

  await env.apply(applicationYaml('2026-01-01'));
  // status.key and the KeyRotated condition are two status writes: wait for both.
  const keyRotated = (o: any) =>
    o?.status?.conditions?.find((c: { type: string }) => c.type === 'KeyRotated')?.reason as string | undefined;
  const rotated = await env.waitFor(
    'Application',
    ns,
    'rotating',
    (o) => o?.status?.key?.id !== firstKeyId && keyRotated(o) === 'GracePeriod',
  );
  const annotatedAt = Date.now();
  expect(rotated.status.key).toMatchObject({ previousId: firstKeyId, rotateRequest: '2026-01-01' });
  expect(rotated.status.conditions.find((c: { type: string }) => c.type === 'KeyRotated')).toMatchObject({
    reason: 'GracePeriod',
  });
  const newKey = (await env.readSecret(ns, 'rotating-key'))!;
  expect(newKey).not.toBe(oldKey);
  expect(newKey).toMatch(/^key_/);

  // During the grace period both keys act as the application.
  expect((await whoAmI(newKey)).body.id).toBe(app.status.id);
  expect((await whoAmI(oldKey)).body.id).toBe(app.status.id);
  const keys = await call(env.api.url, 'GET', `/applications/${app.status.id}/keys`, {
    key: env.api.operatorKey,
    headers: { 'BT-TENANT-ID': (await env.waitReady('Tenant', ns, 'acme')).status.id },
  });
  expect(keys.body.map((k: { id: string }) => k.id)).toEqual([firstKeyId, rotated.status.key.id]);

  // After it, the old key is deleted and refused; the new one keeps working.
  const retired = await env.waitFor(
    'Application',
    ns,
    'rotating',
    (o) => o?.status?.key?.id === rotated.status.key.id && !o.status.key.previousId && keyRotated(o) === 'Current',
    30_000,
  );
  const retiredAfterMs = Date.now() - annotatedAt;
  expect(retiredAfterMs).toBeGreaterThanOrEqual(GRACE_SECONDS * 1000 - 1500);
  expect(retired.status.conditions.find((c: { type: string }) => c.type === 'KeyRotated')).toMatchObject({
    reason: 'Current',
  });
  const deadline = Date.now() + 5000;
  let status = (await whoAmI(oldKey)).status;
  while (status !== 401 && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 100));
    status = (await whoAmI(oldKey)).status;
  }
  expect(status).toBe(401);
  expect((await whoAmI(newKey)).body.id).toBe(app.status.id);
  expect(await env.readSecret(ns, 'rotating-key')).toBe(newKey);

  // The same annotation value again rotates nothing.
  await env.apply(applicationYaml('2026-01-01'));
  await new Promise((resolve) => setTimeout(resolve, 1500));
  expect(await env.readSecret(ns, 'rotating-key')).toBe(newKey);
});

test('spec.keyRotation.every rotates a key older than it, then schedules the next rotation', async () => {
  const yaml = (keyRotation: string) => `
apiVersion: tokenvault.dev/v1alpha1
kind: Application
metadata: {name: scheduled, namespace: ${ns}}
spec:
  tenantRef: {name: acme}
  type: private
  permissions: [token:create]
  keySecretRef: {name: scheduled-key}
  keyRotation: ${keyRotation}
`;
  await env.apply(yaml('{gracePeriod: 2s}'));
  const made = await env.waitFor('Application', ns, 'scheduled', (o) => Boolean(o?.status?.key?.id));
  const oldKey = (await env.readSecret(ns, 'scheduled-key'))!;
  // The key was made long ago, as far as the status says (waiting out a real schedule takes at least a minute).
  await env.kubectl([
    'patch',
    'application',
    'scheduled',
    '-n',
    ns,
    '--subresource=status',
    '--type=merge',
    '-p',
    JSON.stringify({ status: { key: { rotatedAt: '2000-01-01T00:00:00Z' } } }),
  ]);
  await env.apply(yaml('{every: 720h, gracePeriod: 2s}'));
  const rotated = await env.waitFor(
    'Application',
    ns,
    'scheduled',
    // status.key and the KeyRotated condition are two status writes: wait for both to settle.
    (o) =>
      o?.status?.key?.id !== made.status.key.id &&
      !o.status.key.previousId &&
      o.status.conditions?.some(
        (c: { type: string; reason: string }) => c.type === 'KeyRotated' && c.reason === 'Current',
      ),
    30_000,
  );
  expect(await env.readSecret(ns, 'scheduled-key')).not.toBe(oldKey);
  const condition = rotated.status.conditions.find((c: { type: string }) => c.type === 'KeyRotated');
  expect(condition).toMatchObject({ status: 'True', reason: 'Current' });
  const nextAt = Date.parse(rotated.status.key.rotatedAt) + 720 * 3_600_000;
  expect(condition.message).toContain(new Date(nextAt).toISOString());
});

test('the CRD refuses a rotation schedule below 1m, a grace period not shorter than it, and a malformed duration', async () => {
  for (const keyRotation of ['{every: 30s}', '{every: 1h, gracePeriod: 2h}', '{gracePeriod: ten minutes}']) {
    const refused = await env.apply(applicationYaml(undefined, keyRotation)).then(
      () => undefined,
      (error: Error) => error.message,
    );
    expect(refused).toMatch(/keyRotation/);
  }
});
