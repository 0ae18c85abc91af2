// What the Application reconciler sends the vault for a spec: spec.allowedOrigins becomes allowed_origins.
import { expect, test } from '@jest/globals';
import { desiredApplication, type ApplicationObject } from '../../src/controller/reconcilers/application.js';

const application = (spec: Partial<ApplicationObject['spec']>): ApplicationObject => ({
  apiVersion: 'tokenvault.dev/v1alpha1',
  kind: 'Application',
  metadata: { name: 'checkout-page', namespace: 'shop' },
  spec: { tenantRef: { name: 'acme' }, type: 'public', keySecretRef: { name: 'k' }, ...spec },
});

test('spec.allowedOrigins is sent as allowed_origins; without it (or empty) none is sent', () => {
  expect(
    desiredApplication(application({ permissions: ['token:create'], allowedOrigins: ['https://shop.example.com'] })),
  ).toEqual({
    name: 'checkout-page',
    permissions: ['token:create'],
    rules: [],
    allowed_origins: ['https://shop.example.com'],
  });
  expect(desiredApplication(application({ permissions: ['token:create'] }))).toEqual({
    name: 'checkout-page',
    permissions: ['token:create'],
    rules: [],
  });
  expect(desiredApplication(application({ allowedOrigins: [] })).allowed_origins).toBeUndefined();
});
