// What a Tenant may ask of its dedicated workers (issue 14 point 5): the controller's defaults under the Tenant's
// resources, resource by resource; caps on resources and replicas; quantities compared by value, not by text; and a
// TOKENVAULT_DEDICATED_WORKER_DEFAULTS that is not what the chart renders is a configuration error naming it.
import { expect, test } from '@jest/globals';
import { ConfigError, loadConfig } from '../../src/config/config.js';
import { parseQuantity } from '../../src/config/quantity.js';
import { runtimeOverLimits, workerResources } from '../../src/controller/reconcilers/runtime.js';

const defaults = {
  resources: { requests: { cpu: '500m', memory: '512Mi' }, limits: { memory: '1Gi' } },
  maxResources: { cpu: '2', memory: '2Gi' },
  maxReplicas: 3,
};

test('quantities: suffixes, decimals and exponents by value; anything else is not a quantity', () => {
  expect(parseQuantity('500m')).toBe(0.5);
  expect(parseQuantity('2')).toBe(2);
  expect(parseQuantity('1.5Gi')).toBe(1.5 * 2 ** 30);
  expect(parseQuantity('1G')).toBe(1e9);
  expect(parseQuantity('1e3')).toBe(1000);
  expect(parseQuantity(4)).toBe(4);
  for (const bad of ['', 'lots', '1Gib', '-1', '1 Gi']) expect(parseQuantity(bad)).toBeUndefined();
});

test("the Tenant's resources win per resource; a default request above the Tenant's limit is lowered to it", () => {
  expect(workerResources({}, defaults)).toEqual(defaults.resources);
  expect(workerResources({ resources: { requests: { cpu: '1' } } }, defaults)).toEqual({
    requests: { cpu: '1', memory: '512Mi' },
    limits: { memory: '1Gi' },
  });
  expect(workerResources({ resources: { limits: { memory: '256Mi' } } }, defaults)).toEqual({
    requests: { cpu: '500m', memory: '256Mi' },
    limits: { memory: '256Mi' },
  });
  expect(workerResources({}, {})).toBeUndefined();
});

test('caps: above maxResources (by value: 3000m > 2) or maxReplicas is refused with the cap named; at the cap is fine', () => {
  expect(
    runtimeOverLimits({ replicas: 3, resources: { limits: { cpu: '2000m', memory: '2Gi' } } }, defaults),
  ).toBeUndefined();
  expect(runtimeOverLimits({ resources: { requests: { cpu: '3000m' } } }, defaults)).toEqual({
    reason: 'WorkerResourcesTooLarge',
    message: expect.stringContaining(
      'spec.runtime.resources.requests.cpu 3000m is above the most the controller allows, 2',
    ),
  });
  expect(runtimeOverLimits({ replicas: 4 }, defaults)?.reason).toBe('WorkerReplicasTooMany');
  expect(runtimeOverLimits({ resources: { limits: { memory: 'lots' } } }, defaults)?.reason).toBe(
    'WorkerResourcesInvalid',
  );
  expect(runtimeOverLimits({ replicas: 50, resources: { limits: { memory: '64Gi' } } }, {})).toBeUndefined();
});

test('TOKENVAULT_DEDICATED_WORKER_DEFAULTS that is not JSON, or has wrong fields, is a configuration error naming them', () => {
  const load = (value: string) => () =>
    loadConfig({ env: { TOKENVAULT_STORE: 'memory', TOKENVAULT_DEDICATED_WORKER_DEFAULTS: value } });
  expect(load('{nope')).toThrow(ConfigError);
  expect(load('{nope')).toThrow(/TOKENVAULT_DEDICATED_WORKER_DEFAULTS.*must be JSON/);
  expect(
    load(JSON.stringify({ maxResources: { memory: 'lots' }, maxReplicas: 0, imagePullSecrets: ['Bad_Name'] })),
  ).toThrow(
    /maxResources \(an object of quantities\), maxReplicas \(an integer, 1 or more\), imagePullSecrets \(Secret names\)/,
  );
  expect(
    loadConfig({ env: { TOKENVAULT_STORE: 'memory', TOKENVAULT_DEDICATED_WORKER_DEFAULTS: JSON.stringify(defaults) } })
      .controller.dedicatedWorkerDefaults,
  ).toEqual(defaults);
});
