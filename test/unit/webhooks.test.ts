// Webhook pieces without a server: the signature a receiver checks, the backoff schedule, event names.
import { describe, expect, test } from '@jest/globals';
import { createHmac } from 'node:crypto';
import { toProblem, VaultError } from '../../src/errors/registry.js';
import { DestinationPolicy } from '../../src/proxy/destination-policy.js';
import { destinationChecker } from '../../src/webhooks/delivery.js';
import { backoff } from '../../src/webhooks/dispatcher.js';
import { isEventType, normalizeEventType } from '../../src/webhooks/events.js';
import { generateSigningSecret, sign, verify } from '../../src/webhooks/signature.js';

describe('signature', () => {
  const secret = generateSigningSecret();
  const body = '{"event":{"id":"e1"}}';
  const now = 1_800_000_000_000;
  const timestamp = now / 1000;

  test('is base64 HMAC-SHA256 of "<timestamp>.<body>" keyed with the whole secret', () => {
    const expected = createHmac('sha256', secret).update(`${timestamp}.${body}`).digest('base64');
    expect(sign(secret, timestamp, body)).toBe(expected);
    expect(verify(secret, timestamp, body, expected, 300, now)).toBe(true);
  });

  test('another body, secret or timestamp, an old timestamp, or garbage do not verify', () => {
    const signature = sign(secret, timestamp, body);
    expect(verify(secret, timestamp, `${body} `, signature, 300, now)).toBe(false);
    expect(verify(generateSigningSecret(), timestamp, body, signature, 300, now)).toBe(false);
    expect(verify(secret, timestamp + 1, body, signature, 300, now)).toBe(false);
    expect(verify(secret, timestamp, body, signature, 300, now + 301_000)).toBe(false);
    expect(verify(secret, timestamp, body, 'not base64 at all', 300, now)).toBe(false);
    expect(verify(secret, Number.NaN, body, signature, 300, now)).toBe(false);
  });

  test('secrets are whsec_ and 32 random bytes', () => {
    const secrets = new Set(Array.from({ length: 50 }, generateSigningSecret));
    expect(secrets.size).toBe(50);
    for (const s of secrets) expect(Buffer.from(s.slice('whsec_'.length), 'base64url')).toHaveLength(32);
  });
});

test('backoff doubles from backoffMs and stops growing at backoffMaxMs', () => {
  const options = { backoffMs: 1000, backoffMaxMs: 600_000 };
  expect([1, 2, 3, 4, 10, 11, 50].map((attempt) => backoff(attempt, options))).toEqual([
    1000, 2000, 4000, 8000, 512_000, 600_000, 600_000,
  ]);
});

test('event names: the SDK examples spell them with a colon', () => {
  expect(normalizeEventType('token:created')).toBe('token.created');
  expect(isEventType(normalizeEventType('reactor:deleted'))).toBe(true);
  expect(isEventType('token.exploded')).toBe(false);
});

describe('the destination check when a webhook is set', () => {
  const policy = new DestinationPolicy({ allowedHosts: [] });
  const never: Parameters<typeof destinationChecker>[1] = { lookup: () => new Promise(() => {}), lookupMs: 50 };

  test('a host whose DNS does not answer is accepted once the wait is over, not held as long as the resolver', async () => {
    const started = Date.now();
    await expect(destinationChecker(policy, never)('https://hooks.example.com/tokenvault')).resolves.toBeUndefined();
    expect(Date.now() - started).toBeLessThan(2_000);
  });

  test('a host that resolves in time to a private address is refused, naming url', async () => {
    const lookup = async () => [{ address: '10.0.0.7' }];
    const error = await destinationChecker(policy, { lookup, lookupMs: 1_000 })('https://hooks.example.com/x').then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(VaultError);
    expect((error as VaultError).code).toBe('TV_DESTINATION_REFUSED');
    expect(toProblem(error as VaultError)).toMatchObject({ errors: { url: [expect.any(String)] } });
  });
});
