// The CustomResourceDefinitions in crds/: first the YAML itself (one CRD per kind, names, columns, a description on
// every field), then against the real kube-apiserver of test/support/control-plane.ts: they are Established, kubectl
// explains them, valid objects of every kind are accepted, and invalid ones (what the REST API would refuse anyway)
// are refused by the API server with readable messages.

import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import yaml from 'js-yaml';
import { startControlPlane, type ControlPlane } from '../support/control-plane.js';

const crdsDir = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../crds');
const GROUP = 'tokenvault.dev';
const API_VERSION = `${GROUP}/v1alpha1`;
const NS = 'crds-test';

type Schema = {
  description?: string;
  type?: string;
  properties?: Record<string, Schema>;
  items?: Schema;
  additionalProperties?: Schema | boolean;
  required?: string[];
  'x-kubernetes-validations'?: Array<{ rule: string }>;
};

interface Crd {
  apiVersion: string;
  kind: string;
  metadata: { name: string };
  spec: {
    group: string;
    scope: string;
    names: { kind: string; plural: string; singular: string; shortNames: string[]; categories: string[] };
    versions: Array<{
      name: string;
      served: boolean;
      storage: boolean;
      subresources?: { status?: object };
      additionalPrinterColumns: Array<{ name: string; jsonPath: string; type: string; priority?: number }>;
      schema: { openAPIV3Schema: Schema };
    }>;
  };
}

const KINDS: Array<{ kind: string; plural: string; shortName: string; scope: string }> = [
  { kind: 'Tenant', plural: 'tenants', shortName: 'tvt', scope: 'Namespaced' },
  { kind: 'Application', plural: 'applications', shortName: 'tvapp', scope: 'Namespaced' },
  { kind: 'ReactorFormula', plural: 'reactorformulas', shortName: 'tvrf', scope: 'Namespaced' },
  { kind: 'ClusterReactorFormula', plural: 'clusterreactorformulas', shortName: 'tvcrf', scope: 'Cluster' },
  { kind: 'Reactor', plural: 'reactors', shortName: 'tvr', scope: 'Namespaced' },
  { kind: 'Proxy', plural: 'proxies', shortName: 'tvp', scope: 'Namespaced' },
];

function loadCrds(): Map<string, { file: string; crd: Crd }> {
  const crds = new Map<string, { file: string; crd: Crd }>();
  for (const file of readdirSync(crdsDir).filter((name) => /\.ya?ml$/.test(name))) {
    const documents = yaml.loadAll(readFileSync(path.join(crdsDir, file), 'utf8')).filter((d) => d != null) as Crd[];
    expect(documents).toHaveLength(1);
    crds.set(documents[0].spec.names.kind, { file, crd: documents[0] });
  }
  return crds;
}

/** Paths of `expected` (a CRD as written) whose value differs in, or is absent from, `actual` (as stored). */
function lostOnTheWay(expected: unknown, actual: unknown, at: string, lost: string[] = []): string[] {
  if (expected !== null && typeof expected === 'object') {
    if (actual === null || typeof actual !== 'object') {
      lost.push(at);
    } else {
      for (const [key, value] of Object.entries(expected)) {
        const child = Array.isArray(expected) ? `${at}[${key}]` : `${at}.${key}`;
        lostOnTheWay(value, (actual as Record<string, unknown>)[key], child, lost);
      }
    }
  } else if (expected !== actual) {
    lost.push(at);
  }
  return lost;
}

/** Every place in a schema that lacks a description: properties, list items and map values, by path. */
function undescribed(schema: Schema, at: string, missing: string[] = []): string[] {
  for (const [name, property] of Object.entries(schema.properties ?? {})) {
    const where = `${at}.${name}`;
    // metadata is ObjectMeta: kubectl explain documents it from the built-in schema.
    if (where === '.metadata') continue;
    if (!property.description?.trim()) missing.push(where);
    undescribed(property, where, missing);
  }
  if (schema.items) {
    if (!schema.items.description?.trim()) missing.push(`${at}[]`);
    undescribed(schema.items, `${at}[]`, missing);
  }
  if (typeof schema.additionalProperties === 'object') {
    if (!schema.additionalProperties.description?.trim()) missing.push(`${at}{}`);
    undescribed(schema.additionalProperties, `${at}{}`, missing);
  }
  return missing;
}

// --- the YAML ------------------------------------------------------------------------------------------------------

describe('the YAML in crds/', () => {
  const crds = loadCrds();

  test('holds one CustomResourceDefinition per kind, in a file named after it', () => {
    expect([...crds.keys()].sort()).toEqual(KINDS.map((k) => k.kind).sort());
    for (const { kind, plural, shortName, scope } of KINDS) {
      const { file, crd } = crds.get(kind)!;
      expect(file).toBe(`${GROUP}_${plural}.yaml`);
      expect(crd.apiVersion).toBe('apiextensions.k8s.io/v1');
      expect(crd.metadata.name).toBe(`${plural}.${GROUP}`);
      expect(crd.spec.group).toBe(GROUP);
      expect(crd.spec.scope).toBe(scope);
      expect(crd.spec.names).toMatchObject({ kind, plural, singular: kind.toLowerCase(), categories: ['tokenvault'] });
      expect(crd.spec.names.shortNames).toEqual([shortName]);
      expect(crd.spec.versions.map((v) => [v.name, v.served, v.storage])).toEqual([['v1alpha1', true, true]]);
    }
  });

  test('every kind has the status subresource, the standard status and the printer columns Ready, Reason, ID, Age', () => {
    for (const { crd } of crds.values()) {
      const [version] = crd.spec.versions;
      expect(version.subresources).toEqual({ status: {} });
      const status = version.schema.openAPIV3Schema.properties!.status;
      // Beyond the standard status: an Application's key (status.key, its rotation; key-rotation.ts).
      const extra = crd.spec.names.kind === 'Application' ? ['key'] : [];
      expect(Object.keys(status.properties!).sort()).toEqual(['conditions', 'id', ...extra, 'observedGeneration']);
      expect(status.properties!.conditions).toMatchObject({
        type: 'array',
        'x-kubernetes-list-type': 'map',
        'x-kubernetes-list-map-keys': ['type'],
      });
      expect(status.properties!.conditions.items!.required!.sort()).toEqual([
        'lastTransitionTime',
        'message',
        'reason',
        'status',
        'type',
      ]);
      const shown = version.additionalPrinterColumns.filter((c) => !c.priority);
      expect(shown.map((c) => [c.name, c.jsonPath])).toEqual([
        ['Ready', '.status.conditions[?(@.type=="Ready")].status'],
        ['Reason', '.status.conditions[?(@.type=="Ready")].reason'],
        ['ID', '.status.id'],
        ['Age', '.metadata.creationTimestamp'],
      ]);
    }
  });

  test('every field has a description (for kubectl explain)', () => {
    for (const [kind, { crd }] of crds) {
      const schema = crd.spec.versions[0].schema.openAPIV3Schema;
      expect({ kind, missing: undescribed(schema, '') }).toEqual({ kind, missing: [] });
      expect(schema.description).toBeTruthy();
    }
  });
});

// --- against kube-apiserver ----------------------------------------------------------------------------------------

let cp: ControlPlane;

type Manifest = { apiVersion: string; kind: string; metadata: { name: string; namespace?: string }; spec: unknown };

function object(kind: string, name: string, spec: unknown): Manifest {
  const cluster = KINDS.find((k) => k.kind === kind)!.scope === 'Cluster';
  return { apiVersion: API_VERSION, kind, metadata: { name, ...(cluster ? {} : { namespace: NS }) }, spec };
}

const apply = (manifest: Manifest, ...flags: string[]) =>
  cp.kubectl(['apply', ...flags, '-f', '-'], { input: yaml.dump(manifest) });
const dryRun = (manifest: Manifest) => apply(manifest, '--dry-run=server');
const getJson = async (resource: string, name: string, namespaced = true) =>
  JSON.parse((await cp.kubectl(['get', resource, name, ...(namespaced ? ['-n', NS] : []), '-o', 'json'])).stdout);

/** Retries `check` until it passes: the OpenAPI document kubectl explain reads is published shortly after a CRD. */
async function eventually(check: () => Promise<void>, withinMs = 30_000): Promise<void> {
  const deadline = Date.now() + withinMs;
  for (;;) {
    try {
      return await check();
    } catch (error) {
      if (Date.now() > deadline) throw error;
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
  }
}

// Valid objects of each kind, using most fields.
const tenant = object('Tenant', 'acme', {
  displayName: 'ACME Corp',
  settings: { deduplicateTokens: true },
  deletionPolicy: 'Delete',
  managementKeySecretRef: { name: 'acme-management-key' },
  runtime: {
    dedicated: true,
    image: 'ghcr.io/example/tokenvault:1.0.0',
    replicas: 2,
    resources: { limits: { cpu: 2, memory: '256Mi' }, requests: { cpu: '100m', memory: '128Mi' } },
  },
});
const minimalTenant = object('Tenant', 'minimal', { managementKeySecretRef: { name: 'minimal-key' } });
const privateApplication = object('Application', 'backend', {
  tenantRef: { name: 'acme' },
  displayName: 'Backend',
  type: 'private',
  permissions: ['token:create', 'token:read', 'token:use'],
  rules: [
    {
      description: 'PCI data, masked',
      priority: 1,
      container: '/pci/high/',
      transform: 'mask',
      permissions: ['token:read'],
    },
    {
      priority: 2,
      conditions: [
        { attribute: 'type', operator: 'equals', value: 'card' },
        { attribute: 'id', operator: 'starts_with', value: 'card_' },
      ],
      transform: 'reveal',
      permissions: ['token:use'],
    },
  ],
  expiresAt: '2099-01-01T00:00:00Z',
  keySecretRef: { name: 'backend-key', key: 'api-key' },
});
const publicApplication = object('Application', 'browser', {
  tenantRef: { name: 'acme' },
  type: 'public',
  permissions: ['token:create', 'token:update'],
  allowedOrigins: ['https://shop.example.com', 'https://*.preview.example.com'],
  keySecretRef: { name: 'browser-key' },
});
const managementApplication = object('Application', 'admin', {
  tenantRef: { name: 'acme' },
  type: 'management',
  permissions: ['application:read', 'reactor:create', 'proxy:read', 'log:read'],
  keySecretRef: { name: 'admin-key' },
});
const formulaSpec = {
  displayName: 'Charge a card',
  description: 'Sends the card to the processor.',
  status: 'coming_soon',
  icon: 'data:image/png;base64,iVBORw0KGgo=',
  code: 'module.exports = async (req) => ({ raw: req.args });',
  configuration: [
    { name: 'API_KEY', description: 'The processor key', type: 'string' },
    { name: 'RETRIES', type: 'number' },
  ],
  requestParameters: [
    { name: 'card.number', type: 'string' },
    { name: 'card.cvc', type: 'string', optional: true },
    { name: 'amount', description: 'In cents', type: 'number' },
  ],
};
const formula = object('ReactorFormula', 'charge', { tenantRef: { name: 'acme' }, ...formulaSpec });
const clusterFormula = object('ClusterReactorFormula', 'official-charge', formulaSpec);
const reactor = object('Reactor', 'charge', {
  tenantRef: { name: 'acme' },
  displayName: 'Charge',
  formulaRef: { name: 'charge' },
  configuration: {
    API_KEY: { valueFrom: { secretKeyRef: { name: 'processor', key: 'api-key' } } },
    RETRIES: { value: '3', type: 'number' },
  },
  applicationRef: { name: 'backend' },
});
const codeReactor = object('Reactor', 'inline', {
  tenantRef: { name: 'acme' },
  code: 'module.exports = async (req) => ({ raw: req.configuration });',
  configuration: { DEBUG: { value: 'true', type: 'boolean' }, GREETING: { value: 'hello' } },
});
const clusterFormulaReactor = object('Reactor', 'official', {
  tenantRef: { name: 'acme' },
  formulaRef: { kind: 'ClusterReactorFormula', name: 'official-charge' },
});
const proxy = object('Proxy', 'issuer', {
  tenantRef: { name: 'acme' },
  displayName: 'Issuer',
  destinationUrl: 'https://api.issuer.example/v1?fixed=1',
  requestTransform: { code: 'module.exports = async (req) => req.args;' },
  responseTransform: { code: 'module.exports = async (req) => req.args;' },
  configuration: {
    REGION: { value: 'eu' },
    TOKEN: { valueFrom: { secretKeyRef: { name: 'issuer', key: 'token' } } },
  },
  applicationRef: { name: 'backend' },
  requireAuth: false,
  keySecretRef: { name: 'issuer-proxy-key' },
});
const minimalProxy = object('Proxy', 'plain', {
  tenantRef: { name: 'acme' },
  destinationUrl: 'https://example.com',
  keySecretRef: { name: 'plain-proxy-key' },
});
const valid = [
  tenant,
  minimalTenant,
  privateApplication,
  publicApplication,
  managementApplication,
  formula,
  clusterFormula,
  reactor,
  codeReactor,
  clusterFormulaReactor,
  proxy,
  minimalProxy,
];

/** A copy of `manifest` with its spec changed by `change` (which may mutate the copy). */
function edited(manifest: Manifest, change: (spec: any, manifest: Manifest) => void): Manifest {
  const copy = structuredClone(manifest);
  change(copy.spec, copy);
  return copy;
}

// --- refused objects -------------------------------------------------------------------------------------------------

const longName = 'n'.repeat(201);

const invalid: Array<[string, Manifest, RegExp]> = [
  [
    'a display name over 200 characters',
    edited(tenant, (spec) => (spec.displayName = 'x'.repeat(201))),
    /spec\.displayName: Too long: may not be (longer|more) than 200/,
  ],
  [
    'an object name over 200 characters without a display name',
    edited(minimalTenant, (_, m) => (m.metadata.name = longName)),
    /metadata\.name is longer than 200 characters, the longest name the vault accepts: set spec\.displayName/,
  ],
  [
    'an application name over 200 characters without a display name',
    edited(publicApplication, (_, m) => (m.metadata.name = longName)),
    /metadata\.name is longer than 200 characters/,
  ],
  [
    'a misspelt record limit (the REST API refuses one too, rather than dropping it)',
    edited(tenant, (spec) => (spec.limits = { tokenz: 5 })),
    /unknown field "spec\.limits\.tokenz"/,
  ],
  [
    'a misspelt rate limit',
    edited(tenant, (spec) => (spec.rateLimits = { api: { perTenat: 10 } })),
    /unknown field "spec\.rateLimits\.api\.perTenat"/,
  ],
  [
    'an unknown deletion policy',
    edited(tenant, (spec) => (spec.deletionPolicy = 'Orphan')),
    /spec\.deletionPolicy: Unsupported value: "Orphan": supported values: "Retain", "Delete"/,
  ],
  [
    'more than 20 dedicated workers',
    edited(tenant, (spec) => (spec.runtime.replicas = 21)),
    /spec\.runtime\.replicas: Invalid value: 21: spec\.runtime\.replicas in body should be less than or equal to 20/,
  ],
  [
    'a tenant without a management key Secret',
    edited(minimalTenant, (spec) => delete spec.managementKeySecretRef),
    /spec\.managementKeySecretRef: Required value/,
  ],
  [
    'an unknown application type',
    edited(publicApplication, (spec) => (spec.type = 'admin')),
    /spec\.type: Unsupported value: "admin": supported values: "public", "private", "management"/,
  ],
  [
    'an unknown permission',
    edited(privateApplication, (spec) => spec.permissions.push('token:fly')),
    /spec\.permissions\[3\]: Unsupported value: "token:fly"/,
  ],
  [
    'a permission the application type may not hold',
    edited(publicApplication, (spec) => spec.permissions.push('token:read')),
    /spec\.permissions: Invalid value: .*permission token:read cannot be granted to a public application/,
  ],
  [
    'a management permission on a private application',
    edited(privateApplication, (spec) => spec.permissions.push('tenant:delete')),
    /permission tenant:delete cannot be granted to a private application/,
  ],
  [
    'access rules on a management application',
    edited(managementApplication, (spec) => (spec.rules = structuredClone((privateApplication.spec as any).rules))),
    /spec\.rules: Invalid value: .*management applications cannot have access rules/,
  ],
  [
    'allowedOrigins on a private application',
    edited(privateApplication, (spec) => (spec.allowedOrigins = ['https://shop.example.com'])),
    /spec\.allowedOrigins: Invalid value: .*only public applications take allowedOrigins/,
  ],
  [
    'an allowed origin with a path',
    edited(publicApplication, (spec) => (spec.allowedOrigins = ['https://shop.example.com/checkout'])),
    /spec\.allowedOrigins\[0\]: Invalid value: "https:\/\/shop.example.com\/checkout"/,
  ],
  [
    'an access rule granting a permission the type may not hold',
    edited(
      publicApplication,
      (spec) => (spec.rules = [{ priority: 1, container: '/', transform: 'reveal', permissions: ['token:use'] }]),
    ),
    /an access rule grants a permission the application type may not hold/,
  ],
  [
    'an access rule with both a container and conditions',
    edited(privateApplication, (spec) => (spec.rules[1].container = '/pci/')),
    /spec\.rules\[1\]: Invalid value: .*a rule has a container or conditions, not both/,
  ],
  [
    'an access rule with neither a container nor conditions',
    edited(privateApplication, (spec) => delete spec.rules[0].container),
    /spec\.rules\[0\]: Invalid value: .*a rule needs a container or conditions/,
  ],
  [
    'a container that is not a path',
    edited(privateApplication, (spec) => (spec.rules[0].container = 'pci/high')),
    /spec\.rules\[0\]\.container: Invalid value: "pci\/high": spec\.rules\[0\]\.container in body should match/,
  ],
  [
    'a priority below 1',
    edited(privateApplication, (spec) => (spec.rules[0].priority = 0)),
    /spec\.rules\[0\]\.priority: Invalid value: 0: .*should be greater than or equal to 1/,
  ],
  [
    'an unknown condition operator',
    edited(privateApplication, (spec) => (spec.rules[1].conditions[0].operator = 'matches')),
    /spec\.rules\[1\]\.conditions\[0\]\.operator: Unsupported value: "matches"/,
  ],
  [
    'an expiry that is not a date-time',
    edited(privateApplication, (spec) => (spec.expiresAt = 'tomorrow')),
    /spec\.expiresAt: Invalid value: "tomorrow": spec\.expiresAt in body must be of type date-time/,
  ],
  [
    'an unknown formula status',
    edited(formula, (spec) => (spec.status = 'beta')),
    /spec\.status: Unsupported value: "beta": supported values: "verified", "coming_soon"/,
  ],
  [
    'an icon that is not a png or jpeg data URL',
    edited(formula, (spec) => (spec.icon = 'data:image/gif;base64,R0lGOD==')),
    /spec\.icon: Invalid value: "data:image\/gif;base64,R0lGOD==": spec\.icon in body should match/,
  ],
  [
    'formula code over 50,000 characters',
    edited(clusterFormula, (spec) => (spec.code = 'x'.repeat(50_001))),
    /spec\.code: Too long: may not be (longer|more) than 50000/,
  ],
  [
    'a formula configuration name with a dot',
    edited(formula, (spec) => (spec.configuration[0].name = 'api.key')),
    /spec\.configuration\[0\]\.name: Invalid value: "api\.key"/,
  ],
  [
    'a formula configuration name declared twice',
    edited(formula, (spec) => (spec.configuration[1].name = 'API_KEY')),
    /spec\.configuration\[1\]: Duplicate value/,
  ],
  [
    'a formula configuration type other than string, boolean, number',
    edited(formula, (spec) => (spec.configuration[0].type = 'object')),
    /spec\.configuration\[0\]\.type: Unsupported value: "object"/,
  ],
  [
    'a request parameter nested under another one',
    edited(formula, (spec) => spec.requestParameters.push({ name: 'amount.cents', type: 'number' })),
    /spec\.requestParameters: Invalid value: .*a request parameter cannot be nested under another one/,
  ],
  [
    'a reactor with both code and formulaRef',
    edited(reactor, (spec) => (spec.code = 'module.exports = async () => ({});')),
    /spec: Invalid value: .*give exactly one of formulaRef and code/,
  ],
  [
    'a reactor with neither code nor formulaRef',
    edited(reactor, (spec) => delete spec.formulaRef),
    /give exactly one of formulaRef and code/,
  ],
  [
    'a formula reference of an unknown kind',
    edited(reactor, (spec) => (spec.formulaRef.kind = 'Formula')),
    /spec\.formulaRef\.kind: Unsupported value: "Formula": supported values: "ReactorFormula", "ClusterReactorFormula"/,
  ],
  [
    'a configuration entry with both value and valueFrom',
    edited(reactor, (spec) => (spec.configuration.API_KEY.value = 'inline')),
    /spec\.configuration\[API_KEY\]: Invalid value: .*give exactly one of value and valueFrom/,
  ],
  [
    'a configuration entry with neither value nor valueFrom',
    edited(codeReactor, (spec) => (spec.configuration.EMPTY = { type: 'string' })),
    /spec\.configuration\[EMPTY\]: Invalid value: .*give exactly one of value and valueFrom/,
  ],
  [
    'a number configuration value that is not a number',
    edited(reactor, (spec) => (spec.configuration.RETRIES.value = 'three')),
    /spec\.configuration\[RETRIES\]\.value: Invalid value: .*value is not a number, and type is number/,
  ],
  [
    'a boolean configuration value that is not true or false',
    edited(codeReactor, (spec) => (spec.configuration.DEBUG.value = 'yes')),
    /value must be "true" or "false" when type is boolean/,
  ],
  [
    'a configuration value given as a YAML number',
    edited(codeReactor, (spec) => (spec.configuration.DEBUG.value = 3)),
    /spec\.configuration\.DEBUG\.value: Invalid value: "integer": spec\.configuration\.DEBUG\.value in body must be of type string/,
  ],
  [
    'a configuration name over 200 characters',
    edited(codeReactor, (spec) => (spec.configuration[longName] = { value: 'x' })),
    /configuration names must be 1–200 characters/,
  ],
  [
    'a Secret reference without a key',
    edited(proxy, (spec) => delete spec.configuration.TOKEN.valueFrom.secretKeyRef.key),
    /spec\.configuration\.TOKEN\.valueFrom\.secretKeyRef\.key: Required value/,
  ],
  [
    'an http:// destination',
    edited(proxy, (spec) => (spec.destinationUrl = 'http://api.issuer.example/v1')),
    /spec\.destinationUrl: Invalid value: "http:\/\/api\.issuer\.example\/v1": destinationUrl must be an absolute https:\/\/ URL/,
  ],
  [
    'a destination that is not a URL',
    edited(proxy, (spec) => (spec.destinationUrl = 'api.issuer.example')),
    /destinationUrl must be an absolute https:\/\/ URL/,
  ],
  [
    'a destination with user info',
    edited(proxy, (spec) => (spec.destinationUrl = 'https://user:secret@api.issuer.example/')),
    /destinationUrl must not contain user info/,
  ],
  [
    'an IPv4 destination',
    edited(proxy, (spec) => (spec.destinationUrl = 'https://169.254.169.254/latest')),
    /destinationUrl must name a DNS host, not an IP address/,
  ],
  [
    'an IPv4 destination in decimal notation',
    edited(proxy, (spec) => (spec.destinationUrl = 'https://2130706433/')),
    /destinationUrl must name a DNS host, not an IP address/,
  ],
  [
    'an IPv6 destination',
    edited(proxy, (spec) => (spec.destinationUrl = 'https://[::1]:8443/')),
    /destinationUrl must name a DNS host, not an IP address/,
  ],
  [
    'a destination over 2,048 characters',
    edited(proxy, (spec) => (spec.destinationUrl = `https://example.com/${'a'.repeat(2048)}`)),
    /spec\.destinationUrl: Too long: may not be (longer|more) than 2048/,
  ],
  [
    'a transform without code',
    edited(proxy, (spec) => (spec.requestTransform = {})),
    /spec\.requestTransform\.code: Required value/,
  ],
  [
    'a type on a proxy configuration entry (proxy configuration values are strings)',
    edited(proxy, (spec, m) => {
      m.metadata.name = 'typed';
      spec.configuration.REGION = { value: 'eu', type: 'string' };
    }),
    /unknown field "spec\.configuration\.REGION\.type"/,
  ],
  [
    'a proxy without a key Secret',
    edited(minimalProxy, (spec) => delete spec.keySecretRef),
    /spec\.keySecretRef: Required value/,
  ],
];

describe('against kube-apiserver', () => {
  beforeAll(async () => {
    cp = await startControlPlane();
    await cp.kubectl(['create', 'namespace', NS]);
  }, 180_000);

  afterAll(async () => {
    await cp?.stop();
  }, 30_000);

  describe('installed in kube-apiserver', () => {
    test('every CRD is installed, Established and its names accepted', async () => {
      expect([...cp.crds].sort()).toEqual(KINDS.map((k) => `${k.plural}.${GROUP}`).sort());
      const { stdout } = await cp.kubectl(['get', 'customresourcedefinitions', '-o', 'json']);
      const items = JSON.parse(stdout).items as Array<{
        metadata: { name: string };
        status: { conditions: Array<{ type: string; status: string }> };
      }>;
      for (const { plural } of KINDS) {
        const item = items.find((i) => i.metadata.name === `${plural}.${GROUP}`)!;
        const conditions = Object.fromEntries(item.status.conditions.map((c) => [c.type, c.status]));
        expect({ plural, ...conditions }).toMatchObject({ plural, Established: 'True', NamesAccepted: 'True' });
      }
    });

    test('every CRD is stored as written: schema, printer columns, names and scope', async () => {
      // Guards against a client on the way dropping fields it does not model (enum, default, x-kubernetes-*).
      const { stdout } = await cp.kubectl(['get', 'customresourcedefinitions', '-o', 'json']);
      const stored = new Map((JSON.parse(stdout).items as Crd[]).map((item) => [item.spec.names.kind, item] as const));
      for (const [kind, { crd }] of loadCrds()) {
        const installed = stored.get(kind)!;
        expect({ kind, lost: lostOnTheWay(crd.spec, installed.spec, 'spec') }).toEqual({ kind, lost: [] });
      }
    });

    test('kubectl explain prints the field descriptions', async () => {
      await eventually(async () => {
        const { stdout } = await cp.kubectl(['explain', 'tenant.spec.deletionPolicy']);
        const text = stdout.replace(/\s+/g, ' ');
        expect(text).toContain('FIELD: deletionPolicy <string>');
        expect(text).toContain(
          'What deleting this object does to the vault tenant. Retain (the default) keeps the tenant and all its data ' +
            'in the vault; Delete deletes the tenant, every key of it and all its data.',
        );
      });
      for (const { kind } of KINDS) {
        await eventually(async () => {
          const { stdout } = await cp.kubectl(['explain', `${kind.toLowerCase()}.spec`]);
          expect(stdout).toMatch(/DESCRIPTION:\n\s+The desired state of the/);
        });
      }
      const { stdout } = await cp.kubectl(['explain', 'reactor.spec.configuration.valueFrom.secretKeyRef.key']);
      expect(stdout.replace(/\s+/g, ' ')).toContain('The data key within the Secret.');
    });

    test('valid objects of every kind are accepted (server-side dry run)', async () => {
      for (const manifest of valid) {
        const { stdout } = await dryRun(manifest);
        expect(stdout).toContain('(server dry run)');
      }
    });

    test('the API server fills in the defaults', async () => {
      for (const manifest of valid) await apply(manifest);
      expect((await getJson('tenant', 'minimal')).spec).toEqual({
        deletionPolicy: 'Retain',
        managementKeySecretRef: { name: 'minimal-key', key: 'key' },
        settings: { deduplicateTokens: false, fingerprintTokens: true },
        runtime: { dedicated: false },
      });
      expect((await getJson('tenant', 'acme')).spec.settings).toEqual({
        deduplicateTokens: true,
        fingerprintTokens: true,
      });
      expect((await getJson('application', 'backend')).spec.keySecretRef).toEqual({
        name: 'backend-key',
        key: 'api-key',
      });
      expect((await getJson('reactor', 'charge')).spec.formulaRef).toEqual({ kind: 'ReactorFormula', name: 'charge' });
      expect((await getJson('proxy', 'plain')).spec.requireAuth).toBe(true);
      const clusterSpec = (await getJson('clusterreactorformula', 'official-charge', false)).spec;
      expect(clusterSpec.requestParameters.map((p: { optional: boolean }) => p.optional)).toEqual([false, true, false]);
      expect((await getJson('reactorformula', 'charge')).spec.status).toBe('coming_soon');
      const minimalFormula = edited(clusterFormula, (spec, m) => {
        m.metadata.name = 'minimal-formula';
        for (const field of ['status', 'icon', 'configuration', 'requestParameters', 'displayName', 'description']) {
          delete spec[field];
        }
      });
      await apply(minimalFormula);
      expect((await getJson('clusterreactorformula', 'minimal-formula', false)).spec.status).toBe('verified');
    });

    test('printer columns Ready, Reason, ID and Age show in kubectl get; the status is a subresource', async () => {
      const header = (await cp.kubectl(['get', 'tenants', '-n', NS])).stdout.split('\n')[0];
      expect(header.split(/\s+/)).toEqual(['NAME', 'READY', 'REASON', 'ID', 'AGE']);

      const id = '3f2c1d9e-5b7a-4c8e-9f00-1a2b3c4d5e6f';
      const status = {
        id,
        observedGeneration: 1,
        conditions: [
          {
            type: 'Ready',
            status: 'True',
            reason: 'Reconciled',
            message: 'The vault tenant matches the spec.',
            lastTransitionTime: '2025-01-01T00:00:00Z',
            observedGeneration: 1,
          },
        ],
      };
      // Through the main resource, status is ignored...
      await cp.kubectl(['patch', 'tenant', 'acme', '-n', NS, '--type=merge', '-p', JSON.stringify({ status })]);
      expect((await getJson('tenant', 'acme')).status).toBeUndefined();
      // ...and written through the status subresource.
      await cp.kubectl([
        'patch',
        'tenant',
        'acme',
        '-n',
        NS,
        '--subresource=status',
        '--type=merge',
        '-p',
        JSON.stringify({ status }),
      ]);
      const { stdout } = await cp.kubectl(['get', 'tenants', '-n', NS]);
      const row = stdout.split('\n').find((line) => line.startsWith('acme '))!;
      expect(row.split(/\s+/).slice(0, 4)).toEqual(['acme', 'True', 'Reconciled', id]);
      const wide = (await cp.kubectl(['get', 'tenants', '-n', NS, '-o', 'wide'])).stdout.split('\n')[0];
      expect(wide.split(/\s+/)).toEqual(['NAME', 'READY', 'REASON', 'ID', 'POLICY', 'AGE']);

      // The status schema is enforced too.
      await expect(
        cp.kubectl([
          'patch',
          'tenant',
          'acme',
          '-n',
          NS,
          '--subresource=status',
          '--type=merge',
          '-p',
          JSON.stringify({ status: { conditions: [{ ...status.conditions[0], status: 'Maybe' }] } }),
        ]),
      ).rejects.toThrow(/status\.conditions\[0\]\.status: Unsupported value: "Maybe"/);
    });

    test('short names and the category tokenvault list every kind', async () => {
      const names = (args: string[]) =>
        cp.kubectl(['get', ...args, '-o', 'name']).then(({ stdout }) => stdout.split('\n').filter(Boolean).sort());
      const expected = [
        'application.tokenvault.dev/admin',
        'application.tokenvault.dev/backend',
        'application.tokenvault.dev/browser',
        'clusterreactorformula.tokenvault.dev/minimal-formula',
        'clusterreactorformula.tokenvault.dev/official-charge',
        'proxy.tokenvault.dev/issuer',
        'proxy.tokenvault.dev/plain',
        'reactor.tokenvault.dev/charge',
        'reactor.tokenvault.dev/inline',
        'reactor.tokenvault.dev/official',
        'reactorformula.tokenvault.dev/charge',
        'tenant.tokenvault.dev/acme',
        'tenant.tokenvault.dev/minimal',
      ];
      expect(await names(['tokenvault', '-n', NS])).toEqual(expected);
      expect(await names([KINDS.map((k) => k.shortName).join(','), '-n', NS])).toEqual(expected);
    });
  });

  describe('refused by the API server with a readable message', () => {
    test.each(invalid)('%s', async (_, manifest, message) => {
      await expect(dryRun(manifest)).rejects.toThrow(message);
    });
  });

  describe('refused updates', () => {
    // The objects of `valid` are stored by 'the API server fills in the defaults' above; apply them again in case this
    // block runs alone.
    beforeAll(async () => {
      for (const manifest of valid) await apply(manifest);
    }, 60_000);

    const updates: Array<[string, Manifest, RegExp]> = [
      [
        'changing formulaRef',
        edited(reactor, (spec) => (spec.formulaRef = { name: 'another' })),
        /spec\.formulaRef: Forbidden: formulaRef is immutable: create a new Reactor to run another formula/,
      ],
      [
        'changing formulaRef.kind',
        edited(clusterFormulaReactor, (spec) => (spec.formulaRef.kind = 'ReactorFormula')),
        /formulaRef is immutable/,
      ],
      [
        'replacing formulaRef by code',
        edited(reactor, (spec) => {
          delete spec.formulaRef;
          spec.code = 'module.exports = async () => ({});';
        }),
        /spec: Forbidden: a reactor cannot switch between formulaRef and code: create a new Reactor/,
      ],
      [
        'replacing code by formulaRef',
        edited(codeReactor, (spec) => {
          delete spec.code;
          spec.formulaRef = { name: 'charge' };
        }),
        /a reactor cannot switch between formulaRef and code/,
      ],
      [
        'changing the application type',
        edited(publicApplication, (spec) => (spec.type = 'private')),
        /spec\.type: Forbidden: type is immutable: create a new Application to change it/,
      ],
      [
        'changing tenantRef',
        edited(proxy, (spec) => (spec.tenantRef = { name: 'minimal' })),
        /spec\.tenantRef: Forbidden: tenantRef is immutable/,
      ],
    ];

    test.each(updates)('%s', async (_, manifest, message) => {
      await expect(dryRun(manifest)).rejects.toThrow(message);
    });

    test('other changes are accepted: inline code, configuration, display name, permissions', async () => {
      await dryRun(edited(codeReactor, (spec) => (spec.code = 'module.exports = async () => ({ raw: 1 });')));
      await dryRun(edited(reactor, (spec) => (spec.configuration.RETRIES.value = '5')));
      await dryRun(edited(proxy, (spec) => (spec.displayName = 'Issuer v2')));
      await dryRun(edited(privateApplication, (spec) => (spec.permissions = ['token:read'])));
    });
  });
});
