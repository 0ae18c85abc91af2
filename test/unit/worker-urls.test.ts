import { expect, test } from '@jest/globals';
import { ConfigError, loadConfig } from '../../src/config/config.js';
import { WorkerUrlAllowList } from '../../src/runtime/client/worker-urls.js';

const chart = new WorkerUrlAllowList(['http://tokenvault-worker-*.tokenvault.svc:8080']);

test('nothing configured allows no dedicated worker URL', () => {
  const none = new WorkerUrlAllowList([]);
  expect(none.allows('http://tokenvault-worker-acme.tokenvault.svc:8080')).toBe(false);
  expect(loadConfig({ env: { TOKENVAULT_STORE: 'memory' } }).runtime.dedicatedWorkerUrls).toEqual([]);
});

test.each([
  'http://tokenvault-worker-acme.tokenvault.svc:8080',
  'http://tokenvault-worker-acme.tokenvault.svc:8080/',
  'HTTP://Tokenvault-Worker-ACME.tokenvault.svc:8080',
  'http://tokenvault-worker-a-b-c-1234abcd.tokenvault.svc:8080',
])("the controller's worker URL %s is allowed", (url) => {
  expect(chart.allows(url)).toBe(true);
});

test.each([
  ['a dot in the wildcard', 'http://tokenvault-worker-x.evil.example.tokenvault.svc:8080'],
  ['another namespace', 'http://tokenvault-worker-acme.other.svc:8080'],
  ['an empty wildcard', 'http://tokenvault-worker-.tokenvault.svc:8080'],
  ['a host suffix', 'http://tokenvault-worker-acme.tokenvault.svc.evil.example:8080'],
  ['a trailing dot', 'http://tokenvault-worker-acme.tokenvault.svc.:8080'],
  ['another port', 'http://tokenvault-worker-acme.tokenvault.svc:9090'],
  ['the default port', 'http://tokenvault-worker-acme.tokenvault.svc'],
  ['https', 'https://tokenvault-worker-acme.tokenvault.svc:8080'],
  ['a path', 'http://tokenvault-worker-acme.tokenvault.svc:8080/x'],
  ['user info', 'http://u@tokenvault-worker-acme.tokenvault.svc:8080'],
  ['a query', 'http://tokenvault-worker-acme.tokenvault.svc:8080/?a=1'],
  ['not a URL', 'tokenvault-worker-acme'],
])('%s is not allowed', (_what, url) => {
  expect(chart.allows(url)).toBe(false);
});

test('several patterns, a wildcard namespace and a path', () => {
  const list = new WorkerUrlAllowList(['http://tokenvault-worker-*.*.svc:8080', 'https://workers.example.com/pool/']);
  expect(list.allows('http://tokenvault-worker-acme.team-a.svc:8080')).toBe(true);
  expect(list.allows('https://workers.example.com/pool')).toBe(true);
  expect(list.allows('https://workers.example.com')).toBe(false);
  expect(list.allows('http://tokenvault-worker-acme.svc:8080')).toBe(false);
});

test('TOKENVAULT_DEDICATED_WORKER_URLS: comma-separated; a bad pattern is refused by name', () => {
  const config = loadConfig({
    env: { TOKENVAULT_STORE: 'memory', TOKENVAULT_DEDICATED_WORKER_URLS: ' http://a-*.ns.svc:8080 ,https://b ' },
  });
  expect(config.runtime.dedicatedWorkerUrls).toEqual(['http://a-*.ns.svc:8080', 'https://b']);
  for (const bad of ['ftp://a', 'a.ns.svc', 'http://a/*', 'http://u@a', 'http://a?x']) {
    expect(() => loadConfig({ env: { TOKENVAULT_STORE: 'memory', TOKENVAULT_DEDICATED_WORKER_URLS: bad } })).toThrow(
      ConfigError,
    );
  }
  expect(() =>
    loadConfig({ env: { TOKENVAULT_STORE: 'memory', TOKENVAULT_DEDICATED_WORKER_URLS: 'ftp://a' } }),
  ).toThrow(/--dedicated-worker-urls \/ TOKENVAULT_DEDICATED_WORKER_URLS/);
});
