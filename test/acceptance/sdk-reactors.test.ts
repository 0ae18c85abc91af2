// Acceptance: @basis-theory/basis-theory-js 4.x `reactorFormulas.*`, `reactors.*` and `reactors.react` against
// `tokenvault dev` (a real child process from dist/ with its worker process; see test/support/dev-server.ts). The
// reactor runs the charge-card example formula (test/support/example-formulas/), whose fetch reaches a fake processor
// on loopback HTTPS that the dev server allow-lists (localhost) and trusts (the run's CA).
import { BasisTheory } from '@basis-theory/basis-theory-js';
import { rejection, startDevServer, type DevServer } from '../support/dev-server.js';
import { exampleFormula } from '../support/example-formulas.js';
import { testCertificates } from '../support/https.js';
import { startProcessor, type Processor } from '../support/processor.js';

const SECRET = 'sk_test_sdk_processor';
const VISA = '4242424242424242';
const DECLINED = '4000000000000002';

let dev: DevServer;
let processor: Processor;
let bt: Awaited<ReturnType<typeof sdk>>;
let user: Awaited<ReturnType<typeof sdk>>;
let applicationId: string;

function sdk(key: string) {
  return new BasisTheory().init(key, { apiBaseUrl: dev.baseUrl, disableTelemetry: true });
}

beforeAll(async () => {
  processor = await startProcessor({
    'POST /v1/payment_intents': (a) => {
      if (a.headers.authorization !== `Bearer ${SECRET}`)
        return { status: 401, body: { error: { type: 'authentication_error' } } };
      const number = a.body['payment_method_data[card][number]'];
      if (number === DECLINED)
        return { status: 402, body: { error: { type: 'card_error', decline_code: 'insufficient_funds' } } };
      const body = {
        id: 'pi_sdk_1',
        status: 'succeeded',
        amount: Number(a.body.amount),
        client_secret: 'pi_sdk_1_secret_abc',
        payment_method: { card: { brand: 'visa', last4: number.slice(-4) } },
      };
      return { body };
    },
  });
  dev = await startDevServer({
    TOKENVAULT_PROXY_ALLOWED_HOSTS: 'localhost',
    TOKENVAULT_PROXY_CA_FILE: (await testCertificates()).caFile,
  });
  bt = await sdk(dev.rootKey);
  const application = await bt.applications.create({
    name: 'Checkout server',
    type: 'private',
    rules: [
      {
        description: 'all',
        priority: 1,
        container: '/',
        transform: 'reveal',
        permissions: ['token:create', 'token:read', 'token:use'],
      },
    ],
  });
  applicationId = application.id;
  user = await sdk(application.key!);
}, 60_000);

afterAll(async () => {
  await dev?.stop();
  await processor?.close();
});

const CHARGE_FORMULA = {
  name: 'Charge card',
  description: 'Charges a card with the processor',
  type: 'private' as const,
  code: '',
  configuration: [
    { name: 'PROCESSOR_URL', type: 'string' as const },
    { name: 'PROCESSOR_SECRET_KEY', type: 'string' as const, description: 'the secret key' },
  ],
  // camelCase as the SDK takes it; it sends request_parameters.
  requestParameters: [
    { name: 'card.number', type: 'string' as const },
    { name: 'card.expiration_month', type: 'number' as const },
    { name: 'card.expiration_year', type: 'number' as const },
    { name: 'card.cvc', type: 'string' as const },
    { name: 'amount', type: 'number' as const },
    { name: 'currency', type: 'string' as const, optional: true },
  ],
};

async function chargeFormula(name = CHARGE_FORMULA.name) {
  return bt.reactorFormulas.create({ ...CHARGE_FORMULA, name, code: exampleFormula('charge-card') });
}

describe('reactorFormulas through the SDK', () => {
  test('create, retrieve, list by name, update, delete', async () => {
    const created = await chargeFormula();
    expect(created).toMatchObject({
      name: 'Charge card',
      description: 'Charges a card with the processor',
      type: 'private',
    });
    expect(created.id).toMatch(/^[0-9a-f-]{36}$/);
    // The SDK camelCases the answer: request_parameters arrives as requestParameters.
    expect(created.requestParameters).toEqual(CHARGE_FORMULA.requestParameters.map((p) => expect.objectContaining(p)));
    expect(created.configuration.map((c) => c.name)).toEqual(['PROCESSOR_URL', 'PROCESSOR_SECRET_KEY']);
    expect(created.createdAt).toEqual(expect.any(String));

    expect(await bt.reactorFormulas.retrieve(created.id)).toMatchObject({
      id: created.id,
      code: created.code,
      requestParameters: created.requestParameters,
    });
    const listed = await bt.reactorFormulas.list({ name: 'charge' });
    expect(listed.data.map((f) => f.id)).toContain(created.id);
    expect(listed.pagination).toMatchObject({ pageNumber: 1, pageSize: 20 });
    expect((await bt.reactorFormulas.list({ name: 'no such formula' })).data).toEqual([]);

    const updated = await bt.reactorFormulas.update(created.id, {
      ...CHARGE_FORMULA,
      name: 'Charge card v2',
      code: created.code,
      requestParameters: [],
    });
    expect(updated).toMatchObject({ id: created.id, name: 'Charge card v2', requestParameters: [] });
    expect(updated.modifiedAt).toEqual(expect.any(String));

    await bt.reactorFormulas.delete(created.id);
    expect(await rejection(bt.reactorFormulas.retrieve(created.id))).toMatchObject({
      name: 'BasisTheoryApiError',
      status: 404,
    });
  });

  test('validation errors come back as 400 naming the field', async () => {
    const invalid = await rejection(
      bt.reactorFormulas.create({
        ...CHARGE_FORMULA,
        code: 'module.exports = async () => ({})',
        requestParameters: [{ name: 'a', type: 'object' as never }],
      }),
    );
    expect(invalid).toMatchObject({ status: 400, data: { status: 400, title: 'Bad Request' } });
    // The server names `request_parameters[0].type`; the SDK camelCases error keys too (camelcase-keys drops the dot).
    expect(Object.keys(invalid.data.errors)).toEqual(['requestParameters[0]Type']);
  });
});

describe('reactors through the SDK', () => {
  test('create from a formula, retrieve, list by id and name, update, patch, delete', async () => {
    const formula = await chargeFormula('Charge card for reactors');
    const configuration = { PROCESSOR_URL: processor.url, PROCESSOR_SECRET_KEY: 'sk_old' };
    // The SDK's CreateReactor type no longer lists `formula` (deprecated), but the SDK sends it as given.
    const created = await bt.reactors.create({
      name: 'Checkout charges',
      configuration,
      formula: { id: formula.id },
    } as never);
    // Configuration comes back exactly as stored: the SDK does not camelCase its keys.
    expect(created).toMatchObject({
      name: 'Checkout charges',
      configuration,
      formula: { id: formula.id, name: 'Charge card for reactors' },
    });
    expect(created.formula!.requestParameters).toHaveLength(6);
    expect(created.createdAt).toEqual(expect.any(String));

    expect(await bt.reactors.retrieve(created.id)).toMatchObject({
      id: created.id,
      configuration,
      formula: { id: formula.id },
    });
    const byId = await bt.reactors.list({ id: [created.id] });
    expect(byId.data.map((r) => r.id)).toEqual([created.id]);
    expect(byId.pagination).toMatchObject({ totalItems: 1 });
    expect((await bt.reactors.list({ name: 'checkout' })).data.map((r) => r.id)).toContain(created.id);

    const updated = await bt.reactors.update(created.id, {
      name: 'Checkout charges v2',
      configuration: { ...configuration, PROCESSOR_SECRET_KEY: SECRET },
    });
    expect(updated).toMatchObject({
      id: created.id,
      name: 'Checkout charges v2',
      configuration: { PROCESSOR_SECRET_KEY: SECRET },
      formula: { id: formula.id },
    });

    await bt.reactors.patch(created.id, {
      name: 'Checkout charges v3',
      configuration: { PROCESSOR_SECRET_KEY: 'sk_patched' },
    });
    expect(await bt.reactors.retrieve(created.id)).toMatchObject({
      name: 'Checkout charges v3',
      configuration: { PROCESSOR_URL: processor.url, PROCESSOR_SECRET_KEY: 'sk_patched' },
    });

    const inUse = await rejection(bt.reactorFormulas.delete(formula.id));
    expect(inUse.status).toBe(409);

    await bt.reactors.delete(created.id);
    expect(await rejection(bt.reactors.retrieve(created.id))).toMatchObject({ status: 404 });
    await bt.reactorFormulas.delete(formula.id);
  });

  test('create with inline code and an application', async () => {
    const code = 'module.exports = async (req) => ({ raw: { mode: req.configuration.MODE, hasBt: req.bt !== null } });';
    const created = await bt.reactors.create({
      name: 'Inline',
      code,
      configuration: { MODE: 'test' },
      application: { id: applicationId },
    });
    expect(created).toMatchObject({
      name: 'Inline',
      code,
      configuration: { MODE: 'test' },
      application: { id: applicationId },
    });
    expect(await user.reactors.react(created.id, { args: {} })).toEqual({ raw: { mode: 'test', hasBt: true } });
    await bt.reactors.delete(created.id);
  });
});

describe('reactors.react through the SDK', () => {
  let reactorId: string;

  beforeAll(async () => {
    const formula = await chargeFormula('Charge card to react');
    const reactor = await bt.reactors.create({
      name: 'Charge',
      configuration: { PROCESSOR_URL: processor.url, PROCESSOR_SECRET_KEY: SECRET },
      formula: { id: formula.id },
    } as never);
    reactorId = reactor.id;
  });

  async function cardToken(number: string) {
    return (
      await user.tokens.create({
        type: 'card',
        data: { number, expiration_month: 12, expiration_year: 2030, cvc: '123' },
      })
    ).id;
  }

  test('a card token expression in args: raw as the code returned it, tokens created from its tokenize part', async () => {
    const card = await cardToken(VISA);
    const answer = await user.reactors.react(reactorId, {
      args: { card: `{{ ${card} }}`, amount: 1999, currency: 'eur' },
    });
    // raw and tokens are not camelCased by the SDK.
    expect(answer.raw).toEqual({
      id: 'pi_sdk_1',
      status: 'succeeded',
      amount: 1999,
      card: { brand: 'visa', last4: '4242' },
    });
    expect(Object.keys(answer.tokens)).toEqual(['client_secret']);
    expect((await user.tokens.retrieve(answer.tokens.client_secret as string)).data).toBe('pi_sdk_1_secret_abc');

    const sent = processor.last('/v1/payment_intents')!;
    expect(sent.headers.authorization).toBe(`Bearer ${SECRET}`);
    expect(sent.body).toMatchObject({
      'payment_method_data[card][number]': VISA,
      'payment_method_data[card][cvc]': '123',
      amount: '1999',
      currency: 'eur',
    });
  });

  test('an SDK error thrown by the code rejects with its status and errors', async () => {
    const card = await cardToken(DECLINED);
    const declined = await rejection(user.reactors.react(reactorId, { args: { card: `{{ ${card} }}`, amount: 10 } }));
    expect(declined).toMatchObject({
      name: 'BasisTheoryApiError',
      status: 402,
      data: { status: 402, detail: 'Invalid Payment Method', errors: { card: ['insufficient_funds'] } },
    });

    const missing = await rejection(user.reactors.react(reactorId, { args: { card: `{{ ${card} }}` } }));
    expect(missing).toMatchObject({ status: 400 });
    expect(Object.keys(missing.data.errors)).toEqual(['amount']);
  });

  test('a key without token:use is refused', async () => {
    const reader = await bt.applications.create({ name: 'Reader', type: 'private', permissions: ['token:read'] });
    const refused = await rejection((await sdk(reader.key!)).reactors.react(reactorId, { args: {} }));
    expect(refused.status).toBe(403);
  });
});
