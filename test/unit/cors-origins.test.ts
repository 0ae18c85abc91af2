// TOKENVAULT_CORS_ORIGINS: what the setting accepts, and which Origin headers its entries match.
import { expect, test } from '@jest/globals';
import { loadConfig } from '../../src/config/config.js';
import { originAllowed, parseCorsOrigins } from '../../src/config/cors-origins.js';

const load = (value?: string) =>
  loadConfig({
    env: { TOKENVAULT_STORE: 'memory', ...(value === undefined ? {} : { TOKENVAULT_CORS_ORIGINS: value }) },
  });

test('unset or * is any origin, none is no origin, a list is those origins (lower-cased, no trailing slash)', () => {
  expect(load().cors).toEqual({ origins: '*', maxAgeSeconds: 7200 });
  expect(load('*').cors.origins).toBe('*');
  expect(load('none').cors.origins).toEqual([]);
  expect(load(' https://Shop.example.com/ ,http://localhost:3000, https://*.preview.example.com').cors.origins).toEqual(
    ['https://shop.example.com', 'http://localhost:3000', 'https://*.preview.example.com'],
  );
});

test('every malformed entry is reported with the setting, at start', () => {
  expect(() =>
    load('https://shop.example.com/checkout, ftp://files.example.com, shop.example.com, https://a.*.com'),
  ).toThrow(
    /TOKENVAULT_CORS_ORIGINS: "https:\/\/shop.example.com\/checkout" is not an origin[\s\S]*"ftp:\/\/files.example.com"[\s\S]*"shop.example.com"[\s\S]*"https:\/\/a.\*.com"/,
  );
  expect(() => loadConfig({ env: { TOKENVAULT_STORE: 'memory', TOKENVAULT_CORS_MAX_AGE_SECONDS: '86401' } })).toThrow(
    /TOKENVAULT_CORS_MAX_AGE_SECONDS/,
  );
});

test('matching: exact origins (scheme and port included), *. for one or more subdomain labels', () => {
  const problems: string[] = [];
  const origins = parseCorsOrigins(
    'https://shop.example.com, https://*.preview.example.com, http://[::1]:8080',
    problems,
    'x',
  );
  expect(problems).toEqual([]);
  const allowed = (origin: string) => originAllowed(origins, origin);
  expect(allowed('https://shop.example.com')).toBe(true);
  expect(allowed('https://SHOP.example.com')).toBe(true);
  expect(allowed('http://shop.example.com')).toBe(false);
  expect(allowed('https://shop.example.com:8443')).toBe(false);
  expect(allowed('https://evil-shop.example.com')).toBe(false);
  expect(allowed('https://pr-1.preview.example.com')).toBe(true);
  expect(allowed('https://a.b.preview.example.com')).toBe(true);
  expect(allowed('https://preview.example.com')).toBe(false);
  expect(allowed('https://evilpreview.example.com')).toBe(false);
  expect(allowed('https://x.preview.example.com.evil.net')).toBe(false);
  expect(allowed('https://x.preview.example.com:444')).toBe(false);
  expect(allowed('http://[::1]:8080')).toBe(true);
  expect(allowed('null')).toBe(false);
  expect(originAllowed('*', 'null')).toBe(true);
  expect(originAllowed([], 'https://shop.example.com')).toBe(false);
});
