// Reactor formulas and reactors through HTTP: validation, visibility, ownership, and invocation rules 1–10 with the
// error rows of spec section 7, run on a real worker with real sandboxes.
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { createApplication, createTenant, revealingApplication, startTestApi, type TestApi } from '../support/api.js';
import { type Answer, call, client } from '../support/http.js';

const ECHO =
  'module.exports = async function (req) { return { raw: { args: req.args, configuration: req.configuration, hasBt: req.bt !== null } }; };';

let api: TestApi;
let mgmt: ReturnType<typeof client>;
let user: ReturnType<typeof client>;
let tenantId: string;

beforeAll(async () => {
  api = await startTestApi();
  const tenant = await createTenant(api.url, api.operatorKey);
  tenantId = tenant.tenantId;
  mgmt = client(api.url, tenant.managementKey);
  const backend = await revealingApplication(api.url, tenant.managementKey, [
    'token:create',
    'token:read',
    'token:use',
  ]);
  user = client(api.url, backend.key);
}, 30_000);

afterAll(async () => {
  await api?.close();
});

async function formula(body: Record<string, unknown>) {
  const answer = await mgmt.post('/reactor-formulas', {
    body: { name: 'f', type: 'private', code: ECHO, configuration: [], request_parameters: [], ...body },
  });
  expect(answer.status).toBe(201);
  return answer.body as { id: string };
}

async function reactor(body: Record<string, unknown>) {
  const answer = await mgmt.post('/reactors', { body: { name: 'r', configuration: {}, ...body } });
  expect(answer.status).toBe(201);
  return answer.body as { id: string };
}

async function react(reactorId: string, args: unknown, key = user) {
  return key.post(`/reactors/${reactorId}/react`, { body: { args } });
}

describe('formulas', () => {
  test('create, read, list with name filter, update, delete', async () => {
    const created = await mgmt.post('/reactor-formulas', {
      body: {
        name: 'Charge card',
        description: 'charges',
        type: 'private',
        icon: 'data:image/png;base64,iVBORw0KGgo=',
        code: ECHO,
        configuration: [{ name: 'API_KEY', type: 'string' }],
        request_parameters: [
          { name: 'card.number', type: 'string' },
          { name: 'amount', type: 'number', optional: true },
        ],
      },
    });
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({
      name: 'Charge card',
      type: 'private',
      status: 'verified',
      created_at: expect.any(String),
    });
    const id = created.body.id;
    expect((await mgmt.get(`/reactor-formulas/${id}`)).body.request_parameters).toHaveLength(2);
    expect((await mgmt.get('/reactor-formulas?name=charge')).body.data.map((f: { id: string }) => f.id)).toContain(id);
    expect((await mgmt.get('/reactor-formulas?name=nomatch')).body.data).toHaveLength(0);
    const updated = await mgmt.put(`/reactor-formulas/${id}`, {
      body: { name: 'Charge card v2', type: 'private', code: ECHO, configuration: [], request_parameters: [] },
    });
    expect(updated.body).toMatchObject({ name: 'Charge card v2', modified_at: expect.any(String) });
    expect((await mgmt.delete(`/reactor-formulas/${id}`)).status).toBe(204);
    expect((await mgmt.get(`/reactor-formulas/${id}`)).status).toBe(404);
  });

  test.each([
    [{ name: 'x'.repeat(201) }, 'name'],
    [{ type: 'public' }, 'type'],
    [{ status: 'beta' }, 'status'],
    [{ icon: 'data:image/gif;base64,R0lGOD' }, 'icon'],
    [{ icon: 'https://example.com/i.png' }, 'icon'],
    [{ code: 'x'.repeat(50_001) }, 'code'],
    [{ configuration: [{ name: 'a' }] }, 'configuration[0].type'],
    [{ configuration: [{ name: 'a.b', type: 'string' }] }, 'configuration[0].name'],
    [
      {
        configuration: [
          { name: 'a', type: 'string' },
          { name: 'a', type: 'number' },
        ],
      },
      'configuration[1].name',
    ],
    [{ configuration: [{ name: 'a', type: 'object' }] }, 'configuration[0].type'],
    [
      {
        request_parameters: [
          { name: 'a', type: 'string' },
          { name: 'a.b', type: 'string' },
        ],
      },
      'request_parameters[1].name',
    ],
    [{ request_parameters: [{ name: 'a', type: 'string', optional: 'yes' }] }, 'request_parameters[0].optional'],
  ])('an invalid formula body → 400 naming the field (%#)', async (override, field) => {
    const answer = await mgmt.post('/reactor-formulas', {
      body: { name: 'f', type: 'private', code: ECHO, configuration: [], request_parameters: [], ...override },
    });
    expect(answer.status).toBe(400);
    expect(Object.keys(answer.body.errors)).toContain(field);
  });

  test('code that does not compile → 422', async () => {
    const answer = await mgmt.post('/reactor-formulas', {
      body: {
        name: 'f',
        type: 'private',
        code: 'module.exports = async function ( {',
        configuration: [],
        request_parameters: [],
      },
    });
    expect(answer.status).toBe(422);
    expect(answer.body.errors.code).toBeTruthy();
  });

  test('official formulas come from the operator; tenants see them but cannot change them', async () => {
    expect(
      (
        await mgmt.post('/reactor-formulas', {
          body: { name: 'o', type: 'official', code: ECHO, configuration: [], request_parameters: [] },
        })
      ).status,
    ).toBe(403);
    const official = await call(api.url, 'POST', '/admin/reactor-formulas', {
      key: api.operatorKey,
      body: { name: 'Official echo', type: 'official', code: ECHO, configuration: [], request_parameters: [] },
    });
    expect(official.status).toBe(201);
    const id = official.body.id;
    expect((await mgmt.get(`/reactor-formulas/${id}`)).body.type).toBe('official');
    expect((await mgmt.get('/reactor-formulas?size=100')).body.data.map((f: { id: string }) => f.id)).toContain(id);
    expect(
      (
        await mgmt.put(`/reactor-formulas/${id}`, {
          body: { name: 'mine now', type: 'private', code: ECHO, configuration: [], request_parameters: [] },
        })
      ).status,
    ).toBe(403);
    expect((await mgmt.delete(`/reactor-formulas/${id}`)).status).toBe(403);
    const other = await createTenant(api.url, api.operatorKey);
    expect((await client(api.url, other.managementKey).get(`/reactor-formulas/${id}`)).status).toBe(200);
  });

  test("another tenant's private formula is not found", async () => {
    const mine = await formula({ name: 'mine' });
    const other = await createTenant(api.url, api.operatorKey);
    const theirs = client(api.url, other.managementKey);
    expect((await theirs.get(`/reactor-formulas/${mine.id}`)).status).toBe(404);
    expect((await theirs.delete(`/reactor-formulas/${mine.id}`)).status).toBe(404);
    expect(
      (await theirs.post('/reactors', { body: { name: 'r', configuration: {}, formula: { id: mine.id } } })).status,
    ).toBe(400);
  });

  test('a formula in use cannot be deleted; the 409 names its reactors', async () => {
    const f = await formula({ name: 'in use' });
    const r = await reactor({ name: 'the user', formula: { id: f.id } });
    const refused = await mgmt.delete(`/reactor-formulas/${f.id}`);
    expect(refused.status).toBe(409);
    expect(refused.body.detail).toContain('the user');
    expect((await mgmt.delete(`/reactors/${r.id}`)).status).toBe(204);
    expect((await mgmt.delete(`/reactor-formulas/${f.id}`)).status).toBe(204);
  });

  test("updating a formula changes its reactors' behaviour", async () => {
    const f = await formula({ name: 'versioned', code: 'module.exports = async () => ({ raw: { version: 1 } });' });
    const r = await reactor({ formula: { id: f.id } });
    expect((await react(r.id, {})).body.raw).toEqual({ version: 1 });
    await mgmt.put(`/reactor-formulas/${f.id}`, {
      body: {
        name: 'versioned',
        type: 'private',
        code: 'module.exports = async () => ({ raw: { version: 2 } });',
        configuration: [],
        request_parameters: [],
      },
    });
    expect((await react(r.id, {})).body.raw).toEqual({ version: 2 });
  });
});

describe('reactors', () => {
  test('configuration must satisfy the formula by name and type', async () => {
    const f = await formula({
      configuration: [
        { name: 'API_KEY', type: 'string' },
        { name: 'RETRIES', type: 'number' },
      ],
    });
    const create = (configuration: unknown) =>
      mgmt.post('/reactors', { body: { name: 'r', formula: { id: f.id }, configuration } });
    expect((await create({ API_KEY: 'k', RETRIES: 3 })).status).toBe(201);
    expect(Object.keys((await create({ API_KEY: 'k' })).body.errors)).toContain('configuration.RETRIES');
    expect(Object.keys((await create({ API_KEY: 'k', RETRIES: '3' })).body.errors)).toContain('configuration.RETRIES');
    expect(Object.keys((await create({ API_KEY: 'k', RETRIES: 3, EXTRA: 'x' })).body.errors)).toContain(
      'configuration.EXTRA',
    );
    expect((await create({ API_KEY: { nested: true }, RETRIES: 3 })).status).toBe(400);
  });

  test('the application must be a public or private application of the tenant', async () => {
    const f = await formula({});
    const pub = await createApplication(api.url, mgmt.key(), {
      name: 'p',
      type: 'public',
      permissions: ['token:create'],
    });
    const own = await createApplication(api.url, mgmt.key(), {
      name: 'm',
      type: 'management',
      permissions: ['tenant:read'],
    });
    const other = await createTenant(api.url, api.operatorKey);
    const foreign = await createApplication(api.url, other.managementKey, {
      name: 'x',
      type: 'private',
      permissions: ['token:use'],
    });
    const create = (id: string) =>
      mgmt.post('/reactors', { body: { name: 'r', formula: { id: f.id }, configuration: {}, application: { id } } });
    expect((await create(pub.id)).status).toBe(201);
    expect((await create(own.id)).body.errors['application.id']).toBeTruthy();
    expect((await create(foreign.id)).body.errors['application.id']).toBeTruthy();
  });

  test('exactly one of formula and code; the formula cannot change; merge patch updates configuration', async () => {
    const f = await formula({ configuration: [{ name: 'A', type: 'string', optional: true }] });
    expect((await mgmt.post('/reactors', { body: { name: 'r', configuration: {} } })).status).toBe(400);
    expect(
      (await mgmt.post('/reactors', { body: { name: 'r', configuration: {}, formula: { id: f.id }, code: ECHO } }))
        .status,
    ).toBe(400);
    const inline = await reactor({ code: ECHO, configuration: { ANY: 'thing' } });
    expect((await mgmt.get(`/reactors/${inline.id}`)).body).toMatchObject({
      code: ECHO,
      configuration: { ANY: 'thing' },
    });

    const r = await reactor({ formula: { id: f.id }, configuration: { A: 'one' } });
    const g = await formula({ name: 'other' });
    const moved = await mgmt.put(`/reactors/${r.id}`, {
      body: { name: 'r', formula: { id: g.id }, configuration: { A: 'one' } },
    });
    expect(moved.status).toBe(400);
    expect(moved.body.errors['formula.id']).toBeTruthy();
    const patched = await mgmt.patch(`/reactors/${r.id}`, {
      body: { name: 'renamed', configuration: { A: 'two' } },
      headers: { 'Content-Type': 'application/merge-patch+json' },
    });
    expect(patched.status).toBe(200);
    expect(patched.body).toMatchObject({ name: 'renamed', configuration: { A: 'two' }, formula: { id: f.id } });
    expect((await mgmt.patch(`/reactors/${r.id}`, { body: { name: 'x' } })).status).toBe(415);

    // Patches of 60 names each cannot merge past the 100 names a body may hold.
    const names = (prefix: string) => Object.fromEntries(Array.from({ length: 60 }, (_, i) => [`${prefix}${i}`, 'v']));
    const wide = await reactor({ code: ECHO, configuration: names('A') });
    const widened = await mgmt.patch(`/reactors/${wide.id}`, {
      body: { configuration: names('B') },
      headers: { 'Content-Type': 'application/merge-patch+json' },
    });
    expect(widened.status).toBe(400);
    expect(widened.body.errors.configuration.join(' ')).toMatch(/100/);
    expect(Object.keys((await mgmt.get(`/reactors/${wide.id}`)).body.configuration)).toHaveLength(60);
  });

  test('list pages and filters by id and name; the reactor carries its formula', async () => {
    const f = await formula({ name: 'listed formula' });
    const a = await reactor({ name: 'alpha reactor', formula: { id: f.id } });
    const b = await reactor({ name: 'beta reactor', formula: { id: f.id } });
    const byId = await mgmt.get(`/reactors?id=${a.id}&id=${b.id}`);
    expect(byId.body.pagination.total_items).toBe(2);
    expect(byId.body.data[0].formula.name).toBe('listed formula');
    expect((await mgmt.get('/reactors?name=ALPHA')).body.data.map((r: { id: string }) => r.id)).toEqual([a.id]);
  });

  test('a tenant whose reactors hold more than 4 MiB of code still lists them all', async () => {
    // One etcd response larger than the client's receive limit (grpc-js: 4 MiB) used to fail the whole list.
    const tenant = await createTenant(api.url, api.operatorKey);
    const own = client(api.url, tenant.managementKey);
    const code = `${ECHO}\n/*${'x'.repeat(49_000)}*/`;
    const created: string[] = [];
    for (let round = 0; round < 9; round++) {
      const answers = await Promise.all(
        Array.from({ length: 10 }, (_, i) =>
          own.post('/reactors', { body: { name: `big ${round * 10 + i}`, configuration: {}, code } }),
        ),
      );
      expect(answers.map((a) => a.status)).toEqual(Array(10).fill(201));
      created.push(...answers.map((a) => a.body.id as string));
    }
    const listed = await own.get('/reactors?page=2&size=50');
    expect(listed.status).toBe(200);
    expect(listed.body.pagination).toMatchObject({ total_items: 90, page_number: 2 });
    expect(listed.body.data).toHaveLength(40);
    expect(listed.body.data[0].code).toBe(code);
  }, 60_000);

  test('configuration is encrypted at rest', async () => {
    const r = await reactor({ code: ECHO, configuration: { SECRET: 'sk_live_quokka_0123456789' } });
    const raw = await api.context.store.get(`/tokenvault/t/${tenantId}/reactors/${r.id}`);
    expect(raw!.value).not.toContain('sk_live_quokka_0123456789');
    expect((await mgmt.get(`/reactors/${r.id}`)).body.configuration.SECRET).toBe('sk_live_quokka_0123456789');
  });
});

describe('invocation rules', () => {
  let cardId: string;

  beforeAll(async () => {
    cardId = (
      await user.post('/tokens', {
        body: {
          type: 'card',
          data: { number: '4242424242424242', expiration_month: 12, expiration_year: 2030, cvc: '123' },
        },
      })
    ).body.id;
  });

  async function echo(parameters: Array<Record<string, unknown>>) {
    const f = await formula({ request_parameters: parameters });
    return (await reactor({ formula: { id: f.id } })).id;
  }

  test('1: names match case-sensitively', async () => {
    const id = await echo([{ name: 'Name', type: 'string' }]);
    const wrongCase = await react(id, { name: 'Ada' });
    expect(wrongCase.status).toBe(400);
    expect(wrongCase.body.errors.Name).toBeTruthy();
    expect((await react(id, { Name: 'Ada' })).body.raw.args).toEqual({ Name: 'Ada' });
  });

  test('2 and 3: dotted names reach nested properties; undeclared properties are removed', async () => {
    const id = await echo([
      { name: 'user.address.city', type: 'string' },
      { name: 'amount', type: 'number' },
    ]);
    const answer = await react(id, {
      user: { address: { city: 'Lisbon', zip: '1000' }, email: 'x@y.z' },
      amount: 5,
      extra: true,
    });
    expect(answer.body.raw.args).toEqual({ user: { address: { city: 'Lisbon' } }, amount: 5 });
  });

  test('4: a missing required parameter → 400 naming it; optional ones may be absent', async () => {
    const id = await echo([
      { name: 'required_one', type: 'string' },
      { name: 'maybe', type: 'string', optional: true },
    ]);
    const missing = await react(id, { maybe: 'x' });
    expect(missing.status).toBe(400);
    expect(Object.keys(missing.body.errors)).toEqual(['required_one']);
    expect((await react(id, { required_one: 'here' })).body.raw.args).toEqual({ required_one: 'here' });
  });

  test('5: values are cast to the declared type, or 400 when they cannot be', async () => {
    const id = await echo([
      { name: 'n', type: 'number' },
      { name: 'b', type: 'boolean' },
      { name: 's', type: 'string' },
    ]);
    expect((await react(id, { n: '42.5', b: 'TRUE', s: 7 })).body.raw.args).toEqual({ n: 42.5, b: true, s: '7' });
    const bad = await react(id, { n: 'forty', b: 'yes', s: { x: 1 } });
    expect(bad.status).toBe(400);
    expect(Object.keys(bad.body.errors).sort()).toEqual(['b', 'n', 's']);
  });

  test('6 and 8: validation runs after detokenization; one card token supplies several parameters', async () => {
    const id = await echo([
      { name: 'card.number', type: 'string' },
      { name: 'card.expiration_month', type: 'number' },
    ]);
    const answer = await react(id, { card: `{{ ${cardId} }}` });
    expect(answer.status).toBe(200);
    expect(answer.body.raw.args).toEqual({ card: { number: '4242424242424242', expiration_month: 12 } });
  });

  test('7: expressions mixed with plaintext', async () => {
    const id = await echo([
      { name: 'label', type: 'string' },
      { name: 'plain', type: 'string' },
    ]);
    const answer = await react(id, { label: `card ending {{ ${cardId} | json: '$.number' | last4 }}`, plain: 'as is' });
    expect(answer.body.raw.args).toEqual({ label: 'card ending 4242', plain: 'as is' });
  });

  test('9: at most 100 tokens per invocation', async () => {
    const id = await echo([]);
    const args = Object.fromEntries(Array.from({ length: 101 }, (_, i) => [`t${i}`, `{{ token-number-${i} }}`]));
    const answer = await react(id, args);
    expect(answer.status).toBe(400);
    expect(answer.body.detail).toMatch(/100/);
  });

  test("10: token:use is needed to invoke, and for each token's container", async () => {
    const id = await echo([{ name: 'card.number', type: 'string' }]);
    const readOnly = await createApplication(api.url, mgmt.key(), {
      name: 'ro',
      type: 'private',
      permissions: ['token:read'],
    });
    expect((await react(id, {}, client(api.url, readOnly.key))).status).toBe(403);
    const generalOnly = await createApplication(api.url, mgmt.key(), {
      name: 'general',
      type: 'private',
      rules: [
        {
          description: 'general',
          priority: 1,
          container: '/general/',
          transform: 'reveal',
          permissions: ['token:use'],
        },
      ],
    });
    const refused = await react(id, { card: `{{ ${cardId} }}` }, client(api.url, generalOnly.key));
    expect(refused.status).toBe(403);
  });

  test('configuration reaches the code; bt is null without an application', async () => {
    const f = await formula({ configuration: [{ name: 'MODE', type: 'string' }] });
    const r = await reactor({ formula: { id: f.id }, configuration: { MODE: 'test' } });
    expect((await react(r.id, {})).body.raw).toMatchObject({ configuration: { MODE: 'test' }, hasBt: false });
  });

  test('warm contexts: module state may persist within one reactor, never across reactors or configurations', async () => {
    const f = await formula({
      name: 'stateful',
      configuration: [{ name: 'MODE', type: 'string' }],
      code: 'let calls = 0; module.exports = async (req) => ({ raw: { calls: ++calls, mode: req.configuration.MODE } });',
    });
    const first = await reactor({ formula: { id: f.id }, configuration: { MODE: 'a' } });
    const second = await reactor({ formula: { id: f.id }, configuration: { MODE: 'a' } });
    expect((await react(first.id, {})).body.raw).toEqual({ calls: 1, mode: 'a' });
    expect((await react(first.id, {})).body.raw).toEqual({ calls: 2, mode: 'a' });
    // Same code, same tenant, same configuration, another reactor: its own context.
    expect((await react(second.id, {})).body.raw).toEqual({ calls: 1, mode: 'a' });
    expect(
      (
        await mgmt.patch(`/reactors/${first.id}`, {
          body: { configuration: { MODE: 'b' } },
          headers: { 'Content-Type': 'application/merge-patch+json' },
        })
      ).status,
    ).toBe(200);
    expect((await react(first.id, {})).body.raw).toEqual({ calls: 1, mode: 'b' });
  });

  test('the tokenize part of the result becomes tokens; raw comes back as it was', async () => {
    const r = await reactor({
      code: `module.exports = async (req) => ({
        raw: { status: 'ok', list: [1, 2] },
        tokenize: { secret: 'tok-' + req.args.n, card: { type: 'card_number', data: '4111111111111111' } },
      });`,
    });
    const answer = await react(r.id, { n: 7 });
    expect(answer.status).toBe(200);
    expect(answer.body.raw).toEqual({ status: 'ok', list: [1, 2] });
    expect(typeof answer.body.tokens.secret).toBe('string');
    expect(answer.body.tokens.card).toMatchObject({ type: 'card_number', id: expect.any(String) });
    expect((await user.get(`/tokens/${answer.body.tokens.secret}`)).body.data).toBe('tok-7');
  });

  test("the tokens of a result wait for the tenant's bulk create turn, and are never refused for a full queue", async () => {
    const gated = await startTestApi({ TOKENVAULT_BULK_TENANT_CONCURRENCY: '1', TOKENVAULT_SCAN_QUEUE_LENGTH: '1' });
    try {
      const tenant = await createTenant(gated.url, gated.operatorKey);
      const app = await revealingApplication(gated.url, tenant.managementKey, [
        'token:create',
        'token:read',
        'token:use',
      ]);
      const key = client(gated.url, app.key);
      const code = "module.exports = async (req) => ({ tokenize: Array.from({ length: 50 }, (_, i) => 'r-' + i) });";
      const created = await client(gated.url, tenant.managementKey).post('/reactors', {
        body: { name: 'r', configuration: {}, code },
      });
      let sent = 0;
      const bulk = () =>
        key.post('/tokenize', { body: Array.from({ length: 100 }, (_unused, i) => `bulk-${sent++}-${i}`) });
      // One bulk create holds the tenant's only turn, one waits for it: the queue is full, a third is refused. Three
      // are sent at once; when the first was done before the third arrived (a fast or a loaded machine), none is
      // refused, and three more are sent, at most five times. The refused one arrived last, so at that moment the other
      // two hold the turn and the queue.
      const answered: Array<Promise<Answer>> = [];
      let refused = false;
      for (let round = 0; round < 5 && !refused; round++) {
        const three = [bulk(), bulk(), bulk()];
        answered.push(...three);
        refused = await new Promise<boolean>((resolve) => {
          let left = three.length;
          for (const answer of three)
            void answer.then((a) => (a.status === 429 ? resolve(true) : --left === 0 && resolve(false)));
        });
      }
      expect(refused).toBe(true);
      const reacted = await key.post(`/reactors/${created.body.id}/react`, { body: { args: {} } });
      expect(reacted.status).toBe(200);
      expect(reacted.body.tokens).toHaveLength(50);
      const answers = (await Promise.all(answered)).filter((answer) => answer.status !== 429);
      expect(answers.map((answer) => answer.status)).toEqual(answers.map(() => 201));
      // Created one at a time, in order: the result's first token came after every accepted bulk create's last one.
      const createdAt = async (id: string) => Date.parse((await key.get(`/tokens/${id}`)).body.created_at);
      const reactorFirst = await createdAt(reacted.body.tokens[0]);
      for (const answer of answers) expect(reactorFirst).toBeGreaterThanOrEqual(await createdAt(answer.body.at(-1)));
    } finally {
      await gated.close();
    }
  }, 60_000);
});

describe('errors from code (section 7)', () => {
  const thrower = (statement: string) =>
    `const { BadRequestError, AuthenticationError, InvalidPaymentMethodError, AuthorizationError, RateLimitError, ReactorRuntimeError, ServiceUnavailableError, CustomHttpResponseError } = require('@basis-theory/basis-theory-reactor-formulas-sdk-js');
     module.exports = async () => { ${statement} };`;

  test.each([
    ["throw new BadRequestError('bad card')", 400],
    ["throw new AuthenticationError('who are you')", 401],
    ["throw new InvalidPaymentMethodError('declined')", 402],
    ["throw new AuthorizationError('not yours')", 403],
    ["throw new RateLimitError('slow down')", 429],
    ["throw new ReactorRuntimeError('broke')", 500],
    ["throw new ServiceUnavailableError('later')", 503],
  ])('%s → %i', async (statement, status) => {
    const r = await reactor({ code: thrower(statement) });
    const answer = await react(r.id, {});
    expect(answer.status).toBe(status);
    expect(answer.body.status).toBe(status);
    expect(answer.body.detail).toEqual(expect.any(String));
  });

  test('CustomHttpResponseError passes its status, headers and body through', async () => {
    const r = await reactor({
      code: thrower(
        "throw new CustomHttpResponseError({ status: 418, headers: { 'X-Teapot': 'yes' }, body: { brewed: false } })",
      ),
    });
    const answer = await react(r.id, {});
    expect(answer.status).toBe(418);
    expect(answer.headers.get('x-teapot')).toBe('yes');
    expect(answer.body).toEqual({ brewed: false });
  });

  test('a CustomHttpResponseError text body is sent as text', async () => {
    const r = await reactor({
      code: thrower(
        "throw new CustomHttpResponseError({ status: 409, headers: { 'Content-Type': 'text/plain' }, body: 'plain text' })",
      ),
    });
    const answer = await react(r.id, {});
    expect(answer.status).toBe(409);
    expect(answer.headers.get('content-type')).toMatch(/^text\/plain/);
    expect(answer.body).toBe('plain text');
  });

  test('anything else thrown → 500 Reactor Runtime Error with the message', async () => {
    const r = await reactor({ code: "module.exports = async () => { throw new Error('kaboom'); };" });
    const answer = await react(r.id, {});
    expect(answer.status).toBe(500);
    expect(answer.body.title).toBe('Reactor Runtime Error');
    expect(answer.body.errors.error).toEqual(['kaboom']);
  });

  test('code that does not export a function → 422', async () => {
    const r = await reactor({ code: 'module.exports = 42;' });
    expect((await react(r.id, {})).status).toBe(422);
  });
});
