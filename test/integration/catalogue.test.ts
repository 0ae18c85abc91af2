// The fixed catalogues (roles, application templates) and the features this deployment does not offer, through HTTP
// on a real etcd.
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { createApplication, createTenant, startTestApi, type TestApi } from '../support/api.js';
import { call, client } from '../support/http.js';
import { UNSUPPORTED_FEATURES } from '../../src/http/routes/unsupported.js';

let api: TestApi;
let mgmt: ReturnType<typeof client>;

beforeAll(async () => {
  api = await startTestApi();
  mgmt = client(api.url, (await createTenant(api.url, api.operatorKey)).managementKey);
});

afterAll(async () => {
  await api?.close();
});

describe('application templates', () => {
  test('cover a public tokenize-only app, a private server app and a management app; each creates a valid application', async () => {
    const listed = await mgmt.get('/application-templates');
    expect(listed.status).toBe(200);
    const templates = listed.body as Array<{
      id: string;
      name: string;
      application_type: string;
      template_type: string;
      is_starter: boolean;
      permissions: string[];
      rules: unknown[];
    }>;
    expect(new Set(templates.filter((t) => t.is_starter).map((t) => t.application_type))).toEqual(
      new Set(['public', 'private', 'management']),
    );
    expect(templates.find((t) => t.application_type === 'public')!.permissions).toEqual(['token:create']);
    for (const template of templates) {
      expect(['starters', 'payments', 'banking', 'pii', 'management']).toContain(template.template_type);
      const one = await mgmt.get(`/application-templates/${template.id}`);
      expect(one.body).toEqual(template);
      const body = {
        name: template.name,
        type: template.application_type,
        permissions: template.permissions,
        rules: template.rules,
      };
      const created = await mgmt.post('/applications', { body });
      expect([template.name, created.status]).toEqual([template.name, 201]);
    }
  });

  test('an unknown id is a 404; a key without application:read is refused', async () => {
    expect((await mgmt.get('/application-templates/00000000-0000-4000-8000-000000000000')).status).toBe(404);
    expect((await mgmt.get('/application-templates/not-an-id')).status).toBe(404);
    const narrow = await createApplication(api.url, mgmt.key(), {
      name: 'n',
      type: 'management',
      permissions: ['tenant:read'],
    });
    expect((await client(api.url, narrow.key).get('/application-templates')).status).toBe(403);
  });
});

test('GET /roles lists the tenant member role names for any tenant key', async () => {
  const publicKey = (
    await createApplication(api.url, mgmt.key(), { name: 'web', type: 'public', permissions: ['token:create'] })
  ).key;
  const roles = await client(api.url, publicKey).get('/roles');
  expect(roles.status).toBe(200);
  expect(roles.body).toEqual([{ name: 'ADMIN' }, { name: 'PRIVACY' }]);
  expect((await call(api.url, 'GET', '/roles')).status).toBe(401);
});

describe('features this deployment does not offer', () => {
  test.each(UNSUPPORTED_FEATURES.map(([prefix, feature]) => [prefix, feature]))(
    '%s → 501 TV_NOT_SUPPORTED naming %s',
    async (prefix, feature) => {
      for (const [method, path] of [
        ['GET', prefix],
        ['POST', prefix],
        ['GET', `${prefix}/some-id`],
        ['DELETE', `${prefix}/some-id/more`],
      ]) {
        const answer = await call(api.url, method, path, { key: mgmt.key(), body: method === 'POST' ? {} : undefined });
        expect([path, answer.status, answer.body.code]).toEqual([path, 501, 'TV_NOT_SUPPORTED']);
        expect(answer.body.detail).toContain(feature);
      }
      expect((await call(api.url, 'GET', prefix)).status).toBe(401);
    },
  );

  test('client-side encryption is supported: /keys answers, and a token whose `encrypted` is no JWE → 400 naming it', async () => {
    const key = (
      await createApplication(api.url, mgmt.key(), {
        name: 'w',
        type: 'private',
        permissions: ['token:create', 'token:update'],
      })
    ).key;
    const answer = await client(api.url, key).post('/tokens', {
      body: { type: 'token', encrypted: 'eyJhbGciOi.x.y.z.w' },
    });
    expect([answer.status, answer.body.code, Object.keys(answer.body.errors)]).toEqual([
      400,
      'TV_INVALID_ENCRYPTED',
      ['encrypted'],
    ]);
    expect((await mgmt.get('/keys')).status).toBe(200);
  });

  test('paths near a feature are still plain 404s', async () => {
    expect((await mgmt.get('/3dsx')).status).toBe(404);
    expect((await mgmt.get('/tenants/self/unknown')).status).toBe(404);
  });
});
