// The ReactorFormula, ClusterReactorFormula, Reactor and Proxy reconcilers against a real kube-apiserver and the real
// API (etcd, worker) through test/support/operator.ts: objects applied as YAML with kubectl become vault resources,
// Secret-sourced configuration follows the Secret, managed resources refuse REST changes, missing references recover,
// deletions reach the vault (and a formula still in use waits), and the proxy key Secret works on /proxy.
import { afterAll, beforeAll, describe, expect, jest, test } from '@jest/globals';
import { call } from '../support/http.js';
import { readyCondition, startOperatorEnv, type OperatorEnv, tenantYaml } from '../support/operator.js';

let env: OperatorEnv;
let ns: string;
let tenantId: string;
let appKey: string;
const official = `official-echo-${process.pid}`;

const formulaCode = (version: number) =>
  `module.exports = async (req) => ({ raw: { version: ${version}, greeting: req.configuration.greeting, secret: req.configuration.secret, limit: req.configuration.limit, bt: req.bt !== null } });`;

const formulaYaml = (name: string, version: number) => `
apiVersion: tokenvault.dev/v1alpha1
kind: ReactorFormula
metadata: {name: ${name}, namespace: ${ns}}
spec:
  tenantRef: {name: acme}
  description: Echoes its configuration.
  code: ${JSON.stringify(formulaCode(version))}
  configuration:
    - {name: greeting, type: string}
    - {name: secret, type: string}
    - {name: limit, type: number}
`;

const reactorYaml = (name: string, formula: string) => `
apiVersion: tokenvault.dev/v1alpha1
kind: Reactor
metadata: {name: ${name}, namespace: ${ns}}
spec:
  tenantRef: {name: acme}
  formulaRef: {name: ${formula}}
  applicationRef: {name: app}
  configuration:
    greeting: {value: hello}
    limit: {value: "5"}
    secret: {valueFrom: {secretKeyRef: {name: reactor-config, key: apiSecret}}}
`;

async function react(name: string, key = appKey) {
  const reactor = await env.waitReady('Reactor', ns, name);
  return call(env.api.url, 'POST', `/reactors/${reactor.status.id}/react`, { key, body: { args: {} } });
}

/** Retries `attempt` until `check` passes on its result (the manager needs a moment to see a change). */
async function until<T>(attempt: () => Promise<T>, check: (value: T) => void, timeoutMs = 20_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await attempt();
    try {
      check(value);
      return value;
    } catch (error) {
      if (Date.now() > deadline) throw error;
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
  }
}

const reactUntil = (name: string, expected: Record<string, unknown>) =>
  until(
    () => react(name),
    (answer) => {
      expect(answer.status).toBe(200);
      expect(answer.body.raw).toMatchObject(expected);
    },
  );

const gone = (kind: string, name: string, namespace: string | undefined = ns) =>
  env.waitFor(kind, namespace, name, (o) => o === undefined);

beforeAll(async () => {
  env = await startOperatorEnv({ resyncMs: 120_000 }); // changes must arrive through references, not a resync
  ns = await env.namespace('resources');
  await env.apply(`
apiVersion: v1
kind: Secret
metadata: {name: reactor-config, namespace: ${ns}}
stringData: {apiSecret: s3cret-1}
---
${tenantYaml(ns)}
---
apiVersion: tokenvault.dev/v1alpha1
kind: Application
metadata: {name: app, namespace: ${ns}}
spec:
  tenantRef: {name: acme}
  type: private
  permissions: [token:use, token:create]
  keySecretRef: {name: app-key}
---
apiVersion: tokenvault.dev/v1alpha1
kind: ClusterReactorFormula
metadata: {name: ${official}}
spec:
  code: ${JSON.stringify('module.exports = async (req) => ({ raw: { official: true, enabled: req.configuration.enabled } });')}
  configuration:
    - {name: enabled, type: boolean}
---
apiVersion: tokenvault.dev/v1alpha1
kind: Reactor
metadata: {name: uses-official, namespace: ${ns}}
spec:
  tenantRef: {name: acme}
  formulaRef: {kind: ClusterReactorFormula, name: ${official}}
  configuration:
    enabled: {value: "true"}
---
apiVersion: tokenvault.dev/v1alpha1
kind: Proxy
metadata: {name: issuer, namespace: ${ns}}
spec:
  tenantRef: {name: acme}
  destinationUrl: https://localhost:9/base
  applicationRef: {name: app}
  requestTransform: {code: ${JSON.stringify('module.exports = async (req) => ({ body: req.args.body, headers: req.args.headers });')}}
  configuration:
    PLAIN: {value: plain}
    SECRET: {valueFrom: {secretKeyRef: {name: reactor-config, key: apiSecret}}}
  keySecretRef: {name: issuer-proxy-key}
---
${formulaYaml('echo', 1)}
---
${reactorYaml('echo-reactor', 'echo')}
`);
  tenantId = (await env.waitReady('Tenant', ns, 'acme')).status.id;
  await env.waitReady('Application', ns, 'app');
  appKey = (await env.readSecret(ns, 'app-key'))!;
}, 120_000);

afterAll(async () => {
  await env?.stop();
}, 60_000);

jest.setTimeout(60_000);

describe('formulas, reactors and proxies from Kubernetes objects', () => {
  test('every object becomes Ready and the vault serves it, managed by its object', async () => {
    const formula = await env.waitReady('ReactorFormula', ns, 'echo');
    const cluster = await env.waitReady('ClusterReactorFormula', undefined, official);
    const reactor = await env.waitReady('Reactor', ns, 'echo-reactor');
    const proxy = await env.waitReady('Proxy', ns, 'issuer');
    await env.waitReady('Reactor', ns, 'uses-official');
    for (const object of [formula, cluster, reactor, proxy]) expect(object.status.id).toBe(object.metadata.uid);

    const inTenant = { tenantId };
    const vaultFormula = await env.vault.call<any>('GET', `/reactor-formulas/${formula.status.id}`, inTenant);
    expect(vaultFormula).toMatchObject({ name: 'echo', type: 'private', description: 'Echoes its configuration.' });
    expect(vaultFormula.managed_by).toEqual({ kind: 'ReactorFormula', namespace: ns, name: 'echo' });
    const vaultOfficial = await env.vault.call<any>('GET', `/reactor-formulas/${cluster.status.id}`, inTenant);
    expect(vaultOfficial).toMatchObject({
      name: official,
      type: 'official',
      managed_by: { kind: 'ClusterReactorFormula', name: official },
    });
    const vaultReactor = await env.vault.call<any>('GET', `/reactors/${reactor.status.id}`, inTenant);
    expect(vaultReactor.configuration).toEqual({ greeting: 'hello', limit: 5, secret: 's3cret-1' });
    const vaultProxy = await env.vault.call<any>('GET', `/proxies/${proxy.status.id}`, inTenant);
    expect(vaultProxy).toMatchObject({
      name: 'issuer',
      destination_url: 'https://localhost:9/base',
      configuration: { PLAIN: 'plain', SECRET: 's3cret-1' },
      require_auth: true,
    });
    expect(await env.readSecret(ns, 'issuer-proxy-key')).toBe(vaultProxy.key);
  });

  test('the reactor runs with the key from the Application Secret, typed and Secret-sourced configuration included', async () => {
    await reactUntil('echo-reactor', { version: 1, greeting: 'hello', secret: 's3cret-1', limit: 5, bt: true });
    await reactUntil('uses-official', { official: true, enabled: true });
  });

  test('a Secret change updates the reactor and the proxy; a formula edit changes behaviour', async () => {
    await env.kubectl([
      '-n',
      ns,
      'patch',
      'secret',
      'reactor-config',
      '--type=merge',
      '-p',
      JSON.stringify({ stringData: { apiSecret: 's3cret-2' } }),
    ]);
    await reactUntil('echo-reactor', { secret: 's3cret-2' });
    const proxy = await env.waitReady('Proxy', ns, 'issuer');
    await until(
      () => env.vault.call<any>('GET', `/proxies/${proxy.status.id}`, { tenantId }),
      (p) => expect(p.configuration).toEqual({ PLAIN: 'plain', SECRET: 's3cret-2' }),
    );

    await env.apply(formulaYaml('echo', 2));
    await env.waitReady('ReactorFormula', ns, 'echo');
    await reactUntil('echo-reactor', { version: 2, secret: 's3cret-2' });
  });

  test('a REST change to a managed reactor with a tenant key is refused with 409 naming the object', async () => {
    const reactor = await env.waitReady('Reactor', ns, 'echo-reactor');
    const managementKey = (await env.readSecret(ns, 'acme-management'))!;
    const answer = await call(env.api.url, 'PUT', `/reactors/${reactor.status.id}`, {
      key: managementKey,
      body: { name: 'hijacked' },
    });
    expect(answer.status).toBe(409);
    expect(answer.body.detail).toContain(`Reactor ${ns}/echo-reactor`);
    const deleted = await call(env.api.url, 'DELETE', `/reactors/${reactor.status.id}`, { key: managementKey });
    expect(deleted.status).toBe(409);
  });

  test('a reactor whose formula does not exist yet waits (ReactorFormulaNotFound), then becomes Ready; deleting it removes it', async () => {
    await env.apply(reactorYaml('late-reactor', 'late'));
    const waiting = await env.waitNotReady('Reactor', ns, 'late-reactor', 'ReactorFormulaNotFound');
    expect(readyCondition(waiting)?.message).toContain(`ReactorFormula ${ns}/late`);
    await env.apply(formulaYaml('late', 7));
    const reactor = await env.waitReady('Reactor', ns, 'late-reactor');
    await reactUntil('late-reactor', { version: 7, secret: 's3cret-2' });

    await env.kubectl(['-n', ns, 'delete', 'reactor', 'late-reactor', '--wait=false']);
    await gone('Reactor', 'late-reactor');
    expect(
      await env.vault.call('GET', `/reactors/${reactor.status.id}`, { tenantId, allowMissing: true }),
    ).toBeUndefined();
  });

  test('a formula still used by a reactor keeps its finalizer (InUse) until the reactor goes', async () => {
    const formula = await env.waitReady('ReactorFormula', ns, 'echo');
    await env.kubectl(['-n', ns, 'delete', 'reactorformula', 'echo', '--wait=false']);
    const inUse = await env.waitNotReady('ReactorFormula', ns, 'echo', 'InUse');
    expect(readyCondition(inUse)?.message).toContain('echo-reactor');
    expect(inUse.metadata.deletionTimestamp).toBeDefined();
    expect(
      await env.vault.call('GET', `/reactor-formulas/${formula.status.id}`, { tenantId, allowMissing: true }),
    ).toBeDefined();

    await env.kubectl(['-n', ns, 'delete', 'reactor', 'echo-reactor', '--wait=false']);
    await gone('Reactor', 'echo-reactor');
    await gone('ReactorFormula', 'echo');
    expect(
      await env.vault.call('GET', `/reactor-formulas/${formula.status.id}`, { tenantId, allowMissing: true }),
    ).toBeUndefined();

    const cluster = await env.waitReady('ClusterReactorFormula', undefined, official);
    await env.kubectl(['-n', ns, 'delete', 'reactor', 'uses-official', '--wait=false']);
    await gone('Reactor', 'uses-official');
    await env.kubectl(['delete', 'clusterreactorformula', official, '--wait=false']);
    await gone('ClusterReactorFormula', official, undefined);
    expect(
      await env.vault.call('GET', `/reactor-formulas/${cluster.status.id}`, { tenantId, allowMissing: true }),
    ).toBeUndefined();
  });

  test('the proxy key from its Secret is accepted by /proxy; a lost key Secret is rewritten', async () => {
    const proxyKey = (await env.readSecret(ns, 'issuer-proxy-key'))!;
    // The key names the proxy; its destination (localhost, not allow-listed) is then refused by the policy.
    const answer = await call(env.api.url, 'POST', '/proxy/path', {
      key: appKey,
      headers: { 'BT-PROXY-KEY': proxyKey },
      body: { a: 1 },
    });
    expect(answer.status).toBe(400);
    expect(answer.body.proxy_error.code).toBe('TV_DESTINATION_REFUSED');
    const unknown = await call(env.api.url, 'POST', '/proxy/path', {
      key: appKey,
      headers: { 'BT-PROXY-KEY': `${proxyKey}x` },
      body: {},
    });
    expect(unknown.status).toBe(404);

    await env.kubectl(['-n', ns, 'delete', 'secret', 'issuer-proxy-key']);
    await env.waitFor('Secret', ns, 'issuer-proxy-key', (secret) => secret !== undefined);
    expect(await env.readSecret(ns, 'issuer-proxy-key')).toBe(proxyKey);

    const proxy = await env.waitReady('Proxy', ns, 'issuer');
    await env.kubectl(['-n', ns, 'delete', 'proxy', 'issuer', '--wait=false']);
    await gone('Proxy', 'issuer');
    expect(
      await env.vault.call('GET', `/proxies/${proxy.status.id}`, { tenantId, allowMissing: true }),
    ).toBeUndefined();
  });
});
