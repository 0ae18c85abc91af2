// Reading etcd directly shows no token data, no masked form and no fingerprint input: everything sensitive the API
// was given is only in ciphertexts.
import { afterAll, beforeAll, expect, test } from '@jest/globals';
import { keys } from '../../src/store/keys.js';
import { createTenant, revealingApplication, startTestApi, openTestStore, type TestApi } from '../support/api.js';
import { client } from '../support/http.js';

let api: TestApi;

beforeAll(async () => {
  api = await startTestApi();
});

afterAll(async () => {
  await api?.close();
});

test('no plaintext of token data, masks or fingerprint input in etcd', async () => {
  const { tenantId, managementKey } = await createTenant(api.url, api.operatorKey);
  const app = await revealingApplication(api.url, managementKey, ['token:create', 'token:read', 'token:update']);
  const w = client(api.url, app.key);
  const secrets = ['4916338506082832', 'Zanzibar-Quokka', '987-65-4321', '876543210123', 'quokka@example.com'];
  const card = await w.post('/tokens', {
    body: {
      type: 'card',
      data: { number: '4916338506082832', cvc: '731', expiration_month: 3, expiration_year: 2031 },
    },
  });
  await w.post('/tokens', {
    body: { type: 'token', data: { pet: 'Zanzibar-Quokka' }, mask: '{{ data.pet | reveal_last: 3 }}' },
  });
  await w.post('/tokens', { body: { type: 'social_security_number', data: '987-65-4321' } });
  await w.post('/tokens', { body: { type: 'us_bank_account_number', data: '876543210123', deduplicate_token: true } });
  await w.post('/tokens', {
    body: { type: 'token', data: 'quokka@example.com', fingerprint_expression: '{{ data | downcase }}' },
  });
  await w.patch(`/tokens/${card.body.id}`, {
    body: { data: { cvc: '732' } },
    headers: { 'Content-Type': 'application/merge-patch+json' },
  });
  await w.post('/tokens', {
    body: { type: 'token', data: 'idempotent-Zanzibar-Quokka' },
    headers: { 'BT-IDEMPOTENCY-KEY': 'k1' },
  });

  const raw = openTestStore();
  try {
    const entries = await raw.range(keys.tenantData(tenantId));
    expect(entries.length).toBeGreaterThan(10);
    const dump = entries.map((e) => `${e.key}=${e.value}`).join('\n');
    // Short values (the cvc, last four digits) could occur by chance inside ids and ciphertexts, so only long ones are searched.
    for (const secret of [...secrets, 'XXXXXXXXXXXX2832', 'XXX-XX-4321']) expect(dump).not.toContain(secret);
    const token = JSON.parse((await raw.get(keys.token(tenantId, card.body.id)))!.value);
    expect(token.sealed).toMatch(/^tv1\./);
    expect(token).not.toHaveProperty('data');
  } finally {
    await raw.close();
  }
});
