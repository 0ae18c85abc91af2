// Formula code written the way the platform's public reactor examples are (test/support/example-formulas/: a token
// in through an expression, a third-party call with fetch/node-fetch, part of the answer tokenized, errors of the
// reactor-formulas SDK thrown) runs unchanged through the HTTP API against a fake processor on loopback HTTPS. The
// processor records what arrived, so each test shows the detokenized data and the configured keys reaching it.
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { createHmac } from 'node:crypto';
import { createTenant, revealingApplication, startTestApi, type TestApi } from '../support/api.js';
import { exampleFormula, type ExampleFormula } from '../support/example-formulas.js';
import { client } from '../support/http.js';
import { testCertificates } from '../support/https.js';
import { startProcessor, type Arrived, type Processor } from '../support/processor.js';

const SECRET = 'sk_test_51HxProcessorKey';
const ACH_KEY = 'ach_test_key_7f3a';
const SIGNING_SECRET = 'whsec_payouts_9c1e';
const VISA = '4242424242424242';
const DECLINED = '4000000000000002';
const NOT_ENROLLED = '4000056655665556';
const NETWORK_PAN = '4012888888881881';
const REPLACEMENT = '5555555555554444';
const TOKEN_PERMISSIONS = ['token:create', 'token:read', 'token:use'];

let api: TestApi;
let processor: Processor;
let mgmt: ReturnType<typeof client>;
let user: ReturnType<typeof client>;
let reactorApplicationId: string;
let payoutAnswer: 'ok' | 409 | 429 | 503 = 'ok';

const unauthorized = { status: 401, body: { error: { type: 'authentication_error', message: 'Invalid API key' } } };
const bearer = (a: Arrived) => a.headers.authorization === `Bearer ${SECRET}`;

const routes = {
  'POST /v1/payment_intents': (a: Arrived) => {
    if (!bearer(a)) return unauthorized;
    const number = a.body['payment_method_data[card][number]'];
    if (number === DECLINED)
      return {
        status: 402,
        body: { error: { type: 'card_error', code: 'card_declined', decline_code: 'insufficient_funds' } },
      };
    return {
      body: {
        id: 'pi_3Nx1',
        status: 'succeeded',
        amount: Number(a.body.amount),
        client_secret: 'pi_3Nx1_secret_Qm9vYmFy',
        payment_method: { card: { brand: 'visa', last4: number.slice(-4) } },
      },
    };
  },
  'POST /v1/verifications': (a: Arrived) => {
    if (a.headers['x-api-key'] !== SECRET) return unauthorized;
    const { card, billing } = a.body;
    if (card.exp_year < 2025) return { status: 402, body: { error: { code: 'expired_card' } } };
    const checks = {
      cvc_check: card.cvc === '123' ? 'pass' : 'fail',
      address_postal_code_check: billing.postal_code ? 'pass' : 'unchecked',
    };
    return { body: { brand: 'visa', checks, network_transaction_id: '483297487231504' } };
  },
  'POST /v1/network_tokens': (a: Arrived) => {
    if (!bearer(a)) return unauthorized;
    const number = a.body.customer === 'cus_broken' ? '4012888888881882' : NETWORK_PAN; // the first fails Luhn
    return {
      status: 201,
      body: {
        id: 'ntok_8d2',
        network_token: { number, exp_month: 9, exp_year: 2031 },
        cryptogram: 'AgAAAAAABk4DWZ4C28yUQAAAAAA=',
      },
    };
  },
  'POST /v1/ach/debits': (a: Arrived) => {
    if (a.headers.authorization !== `Basic ${Buffer.from(`${ACH_KEY}:`).toString('base64')}`)
      return { status: 401, body: { error: 'invalid_api_key' } };
    return {
      status: 201,
      body: {
        id: 'achd_55',
        status: 'pending',
        expected_settlement_date: '2030-01-03',
        trace_number: '021000021234567',
        account: { reference: 'acct_ref_9x' },
      },
    };
  },
  'POST /v1/payouts': (a: Arrived) => {
    if (a.headers['x-signature'] !== createHmac('sha256', SIGNING_SECRET).update(a.text).digest('hex'))
      return { status: 401, body: {} };
    if (payoutAnswer === 429) return { status: 429, headers: { 'retry-after': '30' }, body: { error: 'slow down' } };
    if (payoutAnswer === 503) return { status: 503, body: { error: 'maintenance' } };
    if (payoutAnswer === 409) return { status: 409, body: { payout_id: 'po_existing' } };
    return {
      status: 201,
      body: { id: 'po_77', status: 'approved', approval_code: 'A1B2C3', network_reference: 'NR-0042' },
    };
  },
  'POST /v1/account_updater/inquiries': (a: Arrived) => {
    if (!bearer(a)) return unauthorized;
    if (a.body.card.number === NOT_ENROLLED) return { status: 404, body: { error: 'not_enrolled' } };
    return {
      body: {
        inquiry: { id: 'inq_31', result: 'updated' },
        card: { number: REPLACEMENT, exp_month: 4, exp_year: 2033, brand: 'mastercard' },
        cardholder: { name: 'Ada Lovelace', billing: { line1: '12 St James Square', postal_code: 'SW1Y 4JH' } },
      },
    };
  },
};

beforeAll(async () => {
  processor = await startProcessor(routes);
  api = await startTestApi({
    TOKENVAULT_PROXY_ALLOWED_HOSTS: 'localhost',
    TOKENVAULT_PROXY_CA_FILE: (await testCertificates()).caFile,
  });
  const tenant = await createTenant(api.url, api.operatorKey);
  mgmt = client(api.url, tenant.managementKey);
  user = client(api.url, (await revealingApplication(api.url, tenant.managementKey, TOKEN_PERMISSIONS)).key);
  reactorApplicationId = (await revealingApplication(api.url, tenant.managementKey, TOKEN_PERMISSIONS)).id;
}, 30_000);

afterAll(async () => {
  await api?.close();
  await processor?.close();
});

type Parameter = { name: string; type: 'string' | 'number' | 'boolean'; optional?: boolean };
const str = (name: string, optional?: boolean): Parameter => ({
  name,
  type: 'string',
  ...(optional ? { optional } : {}),
});
const num = (name: string): Parameter => ({ name, type: 'number' });
const CARD = [str('card.number'), num('card.expiration_month'), num('card.expiration_year'), str('card.cvc')];

/** Creates the example's formula (its configuration declared from the values' types) and a reactor running it. */
async function deploy(
  example: ExampleFormula,
  parameters: Parameter[],
  configuration: Record<string, string>,
  applicationId?: string,
) {
  const declared = Object.keys(configuration).map((name) => ({ name, type: 'string' }));
  const formula = await mgmt.post('/reactor-formulas', {
    body: {
      name: example,
      type: 'private',
      code: exampleFormula(example),
      configuration: declared,
      request_parameters: parameters,
    },
  });
  expect(formula.status).toBe(201);
  const application = applicationId ? { application: { id: applicationId } } : {};
  const reactor = await mgmt.post('/reactors', {
    body: { name: example, formula: { id: formula.body.id }, configuration, ...application },
  });
  expect(reactor.status).toBe(201);
  return reactor.body.id as string;
}

const react = (id: string, args: Record<string, unknown>) => user.post(`/reactors/${id}/react`, { body: { args } });

async function card(number: string, data: Record<string, unknown> = {}) {
  const created = await user.post('/tokens', {
    body: { type: 'card', data: { number, expiration_month: 12, expiration_year: 2030, cvc: '123', ...data } },
  });
  expect(created.status).toBe(201);
  return `{{ ${created.body.id} }}`;
}

const dataOf = async (id: string) => (await user.get(`/tokens/${id}`)).body.data;

describe('reactor formulas in the style of the public examples', () => {
  test('charge a card: the card token detokenized into a form POST with the configured key; the client secret tokenized', async () => {
    const id = await deploy('charge-card', [...CARD, num('amount'), str('currency', true)], {
      PROCESSOR_URL: processor.url,
      PROCESSOR_SECRET_KEY: SECRET,
    });
    const answer = await react(id, {
      card: await card(VISA),
      amount: '1999',
      currency: 'eur',
      note: 'dropped: not declared',
    });
    expect(answer.status).toBe(200);
    expect(answer.body.raw).toEqual({
      id: 'pi_3Nx1',
      status: 'succeeded',
      amount: 1999,
      card: { brand: 'visa', last4: '4242' },
    });
    expect(JSON.stringify(answer.body)).not.toContain(VISA);

    const sent = processor.last('/v1/payment_intents')!;
    expect(sent.headers.authorization).toBe(`Bearer ${SECRET}`);
    expect(sent.headers['idempotency-key']).toMatch(
      /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/,
    );
    expect(sent.body).toEqual({
      amount: '1999',
      currency: 'eur',
      confirm: 'true',
      'payment_method_data[type]': 'card',
      'payment_method_data[card][number]': VISA,
      'payment_method_data[card][exp_month]': '12',
      'payment_method_data[card][exp_year]': '2030',
      'payment_method_data[card][cvc]': '123',
    });
    expect(await dataOf(answer.body.tokens.client_secret)).toBe('pi_3Nx1_secret_Qm9vYmFy');
  });

  test("charge a declined card: the processor's card_error is an InvalidPaymentMethodError → 402", async () => {
    const id = await deploy('charge-card', [...CARD, num('amount')], {
      PROCESSOR_URL: processor.url,
      PROCESSOR_SECRET_KEY: SECRET,
    });
    const answer = await react(id, { card: await card(DECLINED), amount: 500 });
    expect(answer.status).toBe(402);
    expect(answer.body).toMatchObject({
      status: 402,
      detail: 'Invalid Payment Method',
      errors: { card: ['insufficient_funds'] },
    });
    expect(processor.last('/v1/payment_intents')!.body['payment_method_data[card][number]']).toBe(DECLINED);
  });

  test('verify a card: checks in raw, the network transaction id tokenized; a CVC mismatch → 400, an expired card → 402', async () => {
    const id = await deploy('verify-card', [...CARD, str('postal_code', true)], {
      PROCESSOR_URL: processor.url,
      PROCESSOR_SECRET_KEY: SECRET,
    });
    const verified = await react(id, { card: await card(VISA), postal_code: '94107' });
    expect(verified.status).toBe(200);
    expect(verified.body.raw).toEqual({
      verified: true,
      brand: 'visa',
      checks: { cvc_check: 'pass', address_postal_code_check: 'pass' },
    });
    expect(await dataOf(verified.body.tokens.network_transaction_id)).toBe('483297487231504');
    expect(processor.last('/v1/verifications')!.body).toEqual({
      card: { number: VISA, exp_month: 12, exp_year: 2030, cvc: '123' },
      billing: { postal_code: '94107' },
    });

    const mismatch = await react(id, { card: await card(VISA, { cvc: '999' }) });
    expect(mismatch.status).toBe(400);
    expect(mismatch.body).toMatchObject({
      detail: 'Bad Request',
      errors: { 'card.cvc': ['The security code does not match'] },
    });

    const expired = await react(id, { card: await card(VISA, { expiration_year: 2021 }) });
    expect(expired.status).toBe(402);
    expect(expired.body.errors).toEqual({ error: ['expired_card'] });
  });

  test("provision a network token: stored with req.bt under the reactor's application, read back through the API", async () => {
    const id = await deploy(
      'network-token',
      [...CARD, str('customer_id')],
      { PROCESSOR_URL: processor.url, PROCESSOR_SECRET_KEY: SECRET },
      reactorApplicationId,
    );
    const answer = await react(id, { card: await card(VISA), customer_id: 'cus_123' });
    expect(answer.status).toBe(200);
    expect(answer.body.raw).toEqual({
      network_token_id: expect.any(String),
      processor_token_id: 'ntok_8d2',
      type: 'card',
    });
    expect(processor.last('/v1/network_tokens')!.body).toEqual({
      pan: VISA,
      expiry: { month: 12, year: 2030 },
      customer: 'cus_123',
    });

    const stored = await user.get(`/tokens/${answer.body.raw.network_token_id}`);
    expect(stored.body).toMatchObject({
      type: 'card',
      data: { number: NETWORK_PAN, expiration_month: 9, expiration_year: 2031 },
    });
    expect(stored.body.metadata).toEqual({ processor_token_id: 'ntok_8d2', customer_id: 'cus_123' });
    expect(await dataOf(answer.body.tokens.cryptogram)).toBe('AgAAAAAABk4DWZ4C28yUQAAAAAA=');

    // The vault refuses the processor's number (Luhn); the code rethrows the vault's field errors as a BadRequestError.
    const refused = await react(id, { card: await card(VISA), customer_id: 'cus_broken' });
    expect(refused.status).toBe(400);
    expect(JSON.stringify(refused.body.errors)).toMatch(/number.*Luhn/);
  });

  test('debit a bank account: a rejected configuration key → 401 AuthenticationError; with the right key the debit goes through', async () => {
    const bank = await user.post('/tokens', {
      body: { type: 'bank', data: { routing_number: '021000021', account_number: '000123456789' } },
    });
    expect(bank.status).toBe(201);
    const parameters = [
      str('bank.routing_number'),
      str('bank.account_number'),
      num('amount'),
      str('description', true),
    ];
    const id = await deploy('ach-debit', parameters, { ACH_API_URL: processor.url, ACH_API_KEY: 'ach_test_revoked' });
    const args = { bank: `{{ ${bank.body.id} }}`, amount: 5000, description: 'Invoice 42' };

    const rejected = await react(id, args);
    expect(rejected.status).toBe(401);
    expect(rejected.body).toMatchObject({
      status: 401,
      detail: 'Authentication Failed',
      errors: { error: ['The ACH provider rejected ACH_API_KEY'] },
    });

    const patched = await mgmt.patch(`/reactors/${id}`, {
      body: { configuration: { ACH_API_KEY: ACH_KEY } },
      headers: { 'Content-Type': 'application/merge-patch+json' },
    });
    expect(patched.status).toBe(200);
    const debited = await react(id, args);
    expect(debited.status).toBe(200);
    expect(debited.body.raw).toEqual({ id: 'achd_55', status: 'pending', expected_settlement_date: '2030-01-03' });
    expect(processor.last('/v1/ach/debits')!.body).toEqual({
      amount: 5000,
      description: 'Invoice 42',
      account: { routing_number: '021000021', account_number: '000123456789', type: 'checking' },
    });
    expect(debited.body.tokens.account_reference).toMatchObject({
      id: expect.any(String),
      type: 'token',
      metadata: { provider: 'ach' },
    });
    expect(await dataOf(debited.body.tokens.account_reference.id)).toBe('acct_ref_9x');
    expect(await dataOf(debited.body.tokens.trace_number)).toBe('021000021234567');
  });

  test("pay out to a card: a signed request; the network's 429, 503 and 409 become RateLimitError, ServiceUnavailableError and a custom response", async () => {
    const parameters = [
      str('card.number'),
      num('card.expiration_month'),
      num('card.expiration_year'),
      num('amount'),
      str('reference'),
    ];
    const configuration = { PAYOUT_URL: processor.url, PAYOUT_API_KEY: SECRET, PAYOUT_SIGNING_SECRET: SIGNING_SECRET };
    const id = await deploy('card-payout', parameters, configuration);
    const args = { card: await card(VISA, { expiration_month: 3 }), amount: 12.5, reference: 'refund-881' };

    payoutAnswer = 'ok';
    const paid = await react(id, args);
    expect(paid.status).toBe(200);
    expect(paid.body.raw).toEqual({ id: 'po_77', status: 'approved' });
    expect(JSON.parse(processor.last('/v1/payouts')!.text)).toEqual({
      amount: 12.5,
      reference: 'refund-881',
      recipient: { pan: VISA, expiry: '03/2030' },
    });
    expect(processor.last('/v1/payouts')!.headers['x-api-key']).toBe(SECRET);
    expect(paid.body.tokens.receipt).toMatchObject({ id: expect.any(String), type: 'token' });
    expect(await dataOf(paid.body.tokens.receipt.id)).toEqual({
      approval_code: 'A1B2C3',
      network_reference: 'NR-0042',
    });

    payoutAnswer = 429;
    const limited = await react(id, args);
    expect(limited.status).toBe(429);
    expect(limited.body).toMatchObject({ status: 429, detail: 'Rate Limit Exceeded', errors: { retry_after: ['30'] } });

    payoutAnswer = 503;
    const unavailable = await react(id, args);
    expect(unavailable.status).toBe(503);
    expect(unavailable.body).toMatchObject({ status: 503, errors: { error: ['The payout network is unavailable'] } });

    payoutAnswer = 409;
    const duplicate = await react(id, args);
    expect(duplicate.status).toBe(409);
    expect(duplicate.headers.get('x-existing-payout')).toBe('po_existing');
    expect(duplicate.body).toEqual({ error: 'duplicate_payout', payout_id: 'po_existing' });
    payoutAnswer = 'ok';
  });

  test("update a stored card: the updater's nested answer tokenized field by field; an unknown card → 400", async () => {
    const configuration = { UPDATER_URL: processor.url, UPDATER_TOKEN: SECRET, MERCHANT_ID: 'mid_4410' };
    const id = await deploy(
      'account-updater',
      [str('card.number'), num('card.expiration_month'), num('card.expiration_year')],
      configuration,
    );
    const answer = await react(id, { card: await card(VISA, { expiration_year: 2026 }) });
    expect(answer.status).toBe(200);
    expect(answer.body.raw).toEqual({ result: 'updated', inquiry_id: 'inq_31', brand: 'mastercard' });
    expect(processor.last('/v1/account_updater/inquiries')!.body).toEqual({
      merchant_id: 'mid_4410',
      card: { number: VISA, exp_month: 12, exp_year: 2026 },
    });

    const { tokens } = answer.body;
    expect(tokens.card).toMatchObject({ id: expect.any(String), type: 'card', metadata: { inquiry_id: 'inq_31' } });
    expect(await dataOf(tokens.card.id)).toEqual({ number: REPLACEMENT, expiration_month: 4, expiration_year: 2033 });
    expect(await dataOf(tokens.cardholder.name)).toBe('Ada Lovelace');
    expect(await dataOf(tokens.cardholder.billing.line1)).toBe('12 St James Square');
    expect(await dataOf(tokens.cardholder.billing.postal_code)).toBe('SW1Y 4JH');

    const unknown = await react(id, { card: await card(NOT_ENROLLED) });
    expect(unknown.status).toBe(400);
    expect(unknown.body.errors).toEqual({ card: ['The card is not enrolled with the account updater'] });
  });
});
