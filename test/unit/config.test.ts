import { describe, expect, test } from '@jest/globals';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { generateApiKey, hashKey } from '../../src/auth/api-keys.js';
import { ConfigError, loadConfig } from '../../src/config/config.js';
import { frameContentSecurityPolicy } from '../../src/http/routes/elements.js';

test('flags win over environment variables, which win over defaults', () => {
  const config = loadConfig({ argv: ['--port', '9000'], env: { TOKENVAULT_PORT: '7000', TOKENVAULT_STORE: 'memory' } });
  expect(config.port).toBe(9000);
  expect(config.host).toBe('0.0.0.0');
  expect(loadConfig({ env: { TOKENVAULT_PORT: '7000', TOKENVAULT_STORE: 'memory' } }).port).toBe(7000);
});

test('etcd endpoints, TLS and secrets from files', () => {
  const dir = mkdtempSync(join(tmpdir(), 'tv-config-'));
  const operatorKey = generateApiKey();
  writeFileSync(join(dir, 'operator'), `${operatorKey}\n`);
  writeFileSync(join(dir, 'kek'), Buffer.alloc(32, 7).toString('base64'));
  const config = loadConfig({
    env: {
      TOKENVAULT_STORE: 'etcds://a:2379,b:2379',
      TOKENVAULT_ETCD_CA_FILE: '/ca.pem',
      TOKENVAULT_OPERATOR_KEY_FILE: join(dir, 'operator'),
      TOKENVAULT_KEK_FILE: join(dir, 'kek'),
    },
  });
  expect(config.store).toEqual({
    kind: 'etcd',
    endpoints: ['https://a:2379', 'https://b:2379'],
    tls: { caFile: '/ca.pem', certFile: undefined, keyFile: undefined },
    requestTimeoutMs: 5000,
  });
  expect(config.operatorKeyHash).toBe(hashKey(operatorKey));
  expect(config.keyEncryptionKeys).toEqual([Buffer.alloc(32, 7)]);
});

test('the etcd deadline is a setting, and a bad one is refused by name', () => {
  const config = loadConfig({ env: { TOKENVAULT_STORE: 'etcd://a:2379', TOKENVAULT_ETCD_REQUEST_TIMEOUT_MS: '1500' } });
  expect(config.store).toMatchObject({ requestTimeoutMs: 1500 });
  expect(() =>
    loadConfig({ env: { TOKENVAULT_STORE: 'etcd://a:2379', TOKENVAULT_ETCD_REQUEST_TIMEOUT_MS: '0' } }),
  ).toThrow(/TOKENVAULT_ETCD_REQUEST_TIMEOUT_MS: must be a whole number from 100/);
});

test('several key-encryption keys, primary first, separated by newlines or commas', () => {
  const [a, b, c] = [1, 2, 3].map((n) => Buffer.alloc(32, n));
  const dir = mkdtempSync(join(tmpdir(), 'tv-config-'));
  writeFileSync(join(dir, 'keks'), `${a.toString('base64')}\n${b.toString('base64')}\r\n\n${c.toString('base64')}\n`);
  expect(
    loadConfig({ env: { TOKENVAULT_STORE: 'memory', TOKENVAULT_KEK_FILE: join(dir, 'keks') } }).keyEncryptionKeys,
  ).toEqual([a, b, c]);
  const inline = `${b.toString('base64')}, ${a.toString('base64')}`;
  expect(loadConfig({ env: { TOKENVAULT_STORE: 'memory', TOKENVAULT_KEK: inline } }).keyEncryptionKeys).toEqual([b, a]);
  expect(loadConfig({ env: { TOKENVAULT_STORE: 'memory' } }).keyEncryptionKeys).toBeUndefined();
});

test('a bad key among several is named by position, and no key text is repeated', () => {
  const good = Buffer.alloc(32, 1).toString('base64');
  // 48 bytes: a hex-looking key that is valid base64 but the wrong size.
  const bad = 'ab'.repeat(32);
  let error: ConfigError | undefined;
  try {
    loadConfig({ env: { TOKENVAULT_STORE: 'memory', TOKENVAULT_KEK: `${good},${bad}` } });
  } catch (caught) {
    error = caught as ConfigError;
  }
  expect(error).toBeInstanceOf(ConfigError);
  expect(error!.message).toContain('TOKENVAULT_KEK');
  expect(error!.message).toContain('key 2 of 2');
  expect(error!.message).not.toContain(good);
  expect(error!.message).not.toContain(bad);
});

test('every bad value is reported at once, naming flag and variable, without echoing secrets', () => {
  let error: ConfigError | undefined;
  try {
    loadConfig({
      env: {
        TOKENVAULT_PORT: 'eighty',
        TOKENVAULT_STORE: 'redis://x',
        TOKENVAULT_LOG_LEVEL: 'loud',
        TOKENVAULT_KEK: 'c2hvcnQ=',
        TOKENVAULT_OPERATOR_KEY: 'tooshortsecret',
        TOKENVAULT_BODY_LIMIT_BYTES: '-1',
        TOKENVAULT_OPERATOR_KEY_FILE: '/no/such/file',
      },
    });
  } catch (caught) {
    error = caught as ConfigError;
  }
  expect(error).toBeInstanceOf(ConfigError);
  const text = error!.message;
  for (const name of [
    'TOKENVAULT_PORT',
    'TOKENVAULT_STORE',
    'TOKENVAULT_LOG_LEVEL',
    'TOKENVAULT_KEK',
    'TOKENVAULT_BODY_LIMIT_BYTES',
    'TOKENVAULT_OPERATOR_KEY_FILE',
  ]) {
    expect(text).toContain(name);
  }
  expect(text).toContain('--port');
  expect(text).not.toContain('c2hvcnQ=');
});

test('a missing store is an error for api, while dev defaults to memory', () => {
  expect(() => loadConfig({ env: {} })).toThrow(/TOKENVAULT_STORE/);
  expect(loadConfig({ env: {}, defaults: { store: 'memory' } }).store).toEqual({ kind: 'memory' });
});

test('unknown flags are refused', () => {
  expect(() => loadConfig({ argv: ['--prot', '1'], env: { TOKENVAULT_STORE: 'memory' } })).toThrow(/prot/);
});

test('expression budget and decoded-size limits: defaults, variables, and bad values named', () => {
  const defaults = loadConfig({ env: { TOKENVAULT_STORE: 'memory' } });
  expect(defaults.expressions).toEqual({ renderMs: 10, budgetMs: 250, deadlineMs: 5000, memoryUnits: 10_000_000 });
  expect(defaults.sizeLimits).toEqual({
    proxyResponseBytes: 10 * 1024 * 1024,
    maxResultBytes: 4 * 1024 * 1024,
    resultBytesInFlight: 32 * 1024 * 1024,
    resultBytesInFlightPerTenant: 8 * 1024 * 1024,
    sandboxHostBytes: 64 * 1024 * 1024,
  });
  const set = loadConfig({
    env: {
      TOKENVAULT_STORE: 'memory',
      TOKENVAULT_EXPRESSION_RENDER_MS: '5',
      TOKENVAULT_EXPRESSION_BUDGET_MS: '50',
      TOKENVAULT_EXPRESSION_DEADLINE_MS: '1000',
      TOKENVAULT_EXPRESSION_MEMORY_UNITS: '100000',
      TOKENVAULT_PROXY_DECODED_RESPONSE_LIMIT_BYTES: '2048',
      TOKENVAULT_REACTOR_RESULT_LIMIT_BYTES: '4096',
      TOKENVAULT_SANDBOX_HOST_LIMIT_BYTES: '8192',
      TOKENVAULT_RESULT_BYTES_IN_FLIGHT: '1048576',
      TOKENVAULT_RESULT_BYTES_IN_FLIGHT_PER_TENANT: '524288',
    },
  });
  expect(set.expressions).toEqual({ renderMs: 5, budgetMs: 50, deadlineMs: 1000, memoryUnits: 100_000 });
  expect(set.sizeLimits).toEqual({
    proxyResponseBytes: 2048,
    maxResultBytes: 4096,
    sandboxHostBytes: 8192,
    resultBytesInFlight: 1_048_576,
    resultBytesInFlightPerTenant: 524_288,
  });
  expect(() =>
    loadConfig({
      env: {
        TOKENVAULT_STORE: 'memory',
        TOKENVAULT_EXPRESSION_BUDGET_MS: '0',
        TOKENVAULT_REACTOR_RESULT_LIMIT_BYTES: 'big',
      },
    }),
  ).toThrow(/TOKENVAULT_EXPRESSION_BUDGET_MS[\s\S]*TOKENVAULT_REACTOR_RESULT_LIMIT_BYTES/);
});

test('rate limits: defaults, variables, 0 for none, replicas auto or a number, bad values named', () => {
  const defaults = loadConfig({ env: { TOKENVAULT_STORE: 'memory' } });
  expect(defaults.rateLimits).toEqual({
    apiPerKey: 1000,
    apiPerTenant: 5000,
    callsPerKey: 500,
    callsPerTenant: 2000,
    windowSeconds: 1,
    replicas: 'auto',
  });
  const set = loadConfig({
    env: {
      TOKENVAULT_STORE: 'memory',
      TOKENVAULT_RATE_LIMIT_API_PER_KEY: '0',
      TOKENVAULT_RATE_LIMIT_API_PER_TENANT: '10',
      TOKENVAULT_RATE_LIMIT_CALLS_PER_KEY: '3',
      TOKENVAULT_RATE_LIMIT_CALLS_PER_TENANT: '4',
      TOKENVAULT_RATE_LIMIT_WINDOW_SECONDS: '60',
      TOKENVAULT_RATE_LIMIT_REPLICAS: '3',
    },
  });
  expect(set.rateLimits).toEqual({
    apiPerKey: 0,
    apiPerTenant: 10,
    callsPerKey: 3,
    callsPerTenant: 4,
    windowSeconds: 60,
    replicas: 3,
  });
  expect(() =>
    loadConfig({
      env: {
        TOKENVAULT_STORE: 'memory',
        TOKENVAULT_RATE_LIMIT_API_PER_KEY: '-1',
        TOKENVAULT_RATE_LIMIT_WINDOW_SECONDS: '0',
        TOKENVAULT_RATE_LIMIT_REPLICAS: 'many',
      },
    }),
  ).toThrow(
    /TOKENVAULT_RATE_LIMIT_API_PER_KEY[\s\S]*TOKENVAULT_RATE_LIMIT_WINDOW_SECONDS[\s\S]*TOKENVAULT_RATE_LIMIT_REPLICAS/,
  );
});

test('per-tenant record limits: 1000 each by default (tokens 100,000, intents 20,000), 0 for none, flags too, bad values named', () => {
  expect(loadConfig({ env: { TOKENVAULT_STORE: 'memory' } }).perTenant).toEqual({
    tokens: 100_000,
    tokenIntents: 20_000,
    reactors: 1000,
    applications: 1000,
    proxies: 1000,
    formulas: 1000,
  });
  const set = loadConfig({
    argv: ['--reactors-per-tenant', '10000', '--tokens-per-tenant', '3'],
    env: {
      TOKENVAULT_STORE: 'memory',
      TOKENVAULT_TOKEN_INTENTS_PER_TENANT: '0',
      TOKENVAULT_APPLICATIONS_PER_TENANT: '0',
      TOKENVAULT_PROXIES_PER_TENANT: '5',
      TOKENVAULT_FORMULAS_PER_TENANT: '7',
    },
  });
  expect(set.perTenant).toEqual({
    tokens: 3,
    tokenIntents: 0,
    reactors: 10_000,
    applications: 0,
    proxies: 5,
    formulas: 7,
  });
  expect(() =>
    loadConfig({
      env: { TOKENVAULT_STORE: 'memory', TOKENVAULT_REACTORS_PER_TENANT: '-1', TOKENVAULT_FORMULAS_PER_TENANT: 'x' },
    }),
  ).toThrow(/TOKENVAULT_REACTORS_PER_TENANT[\s\S]*TOKENVAULT_FORMULAS_PER_TENANT/);
});

test('the worker secret, the metrics port and the dedicated workers’ NetworkPolicy (issue 12)', () => {
  const base = { TOKENVAULT_STORE: 'memory' };
  const secret = 'w'.repeat(40);
  const config = loadConfig({ env: { ...base, TOKENVAULT_WORKER_SECRET: secret, TOKENVAULT_METRICS_PORT: '9090' } });
  expect(config.workerSecret).toBe(secret);
  expect(config.metricsPort).toBe(9090);
  expect(config.controller.dedicatedNetworkPolicy).toBeUndefined();
  expect(loadConfig({ env: base }).metricsPort).toBeUndefined();
  // Too short a secret is refused without being echoed.
  expect(() => loadConfig({ env: { ...base, TOKENVAULT_WORKER_SECRET: 'short-secret-value' } })).toThrow(
    /TOKENVAULT_WORKER_SECRET: must be at least 32/,
  );
  try {
    loadConfig({ env: { ...base, TOKENVAULT_WORKER_SECRET: 'short-secret-value' } });
  } catch (error) {
    expect((error as Error).message).not.toContain('short-secret-value');
  }
  expect(() => loadConfig({ env: { ...base, TOKENVAULT_METRICS_PORT: '70000' } })).toThrow(/TOKENVAULT_METRICS_PORT/);

  const policy = {
    apiPodLabels: { 'app.kubernetes.io/component': 'api' },
    apiNamespace: 'vault',
    exceptCidrs: ['10.0.0.0/8'],
  };
  expect(
    loadConfig({ env: { ...base, TOKENVAULT_DEDICATED_NETWORK_POLICY: JSON.stringify(policy) } }).controller
      .dedicatedNetworkPolicy,
  ).toEqual({
    ...policy,
    apiPort: 8080,
    egressPorts: [443],
  });
  expect(
    loadConfig({ env: { ...base, TOKENVAULT_DEDICATED_NETWORK_POLICY: 'none' } }).controller.dedicatedNetworkPolicy,
  ).toBeNull();
  expect(() =>
    loadConfig({
      env: {
        ...base,
        TOKENVAULT_DEDICATED_NETWORK_POLICY: '{"apiPodLabels":{},"egressPorts":[0],"exceptCidrs":["x"]}',
      },
    }),
  ).toThrow(/TOKENVAULT_DEDICATED_NETWORK_POLICY: invalid apiPodLabels.*egressPorts.*exceptCidrs/);
  expect(() => loadConfig({ env: { ...base, TOKENVAULT_DEDICATED_NETWORK_POLICY: 'open' } })).toThrow(
    /must be JSON or 'none'/,
  );
});

test('token data size and audit entries per tenant: 4096 and 200,000 by default, 0 for none, bad values named', () => {
  const defaults = loadConfig({ env: { TOKENVAULT_STORE: 'memory' } });
  expect(defaults.limits.tokenDataMaxBytes).toBe(4096);
  expect(defaults.audit.entriesPerTenant).toBe(200_000);
  const set = loadConfig({
    env: { TOKENVAULT_STORE: 'memory', TOKENVAULT_TOKEN_DATA_MAX_BYTES: '0', TOKENVAULT_AUDIT_ENTRIES_PER_TENANT: '0' },
  });
  expect([set.limits.tokenDataMaxBytes, set.audit.entriesPerTenant]).toEqual([0, 0]);
  expect(() =>
    loadConfig({
      env: {
        TOKENVAULT_STORE: 'memory',
        TOKENVAULT_TOKEN_DATA_MAX_BYTES: '-1',
        TOKENVAULT_AUDIT_ENTRIES_PER_TENANT: 'x',
      },
    }),
  ).toThrow(/TOKENVAULT_TOKEN_DATA_MAX_BYTES[\s\S]*TOKENVAULT_AUDIT_ENTRIES_PER_TENANT/);
});

test('idempotency answers and sessions per tenant: 30,000 kept answers of 8 KiB and 20,000 sessions by default', () => {
  const defaults = loadConfig({ env: { TOKENVAULT_STORE: 'memory' } });
  const { idempotencyKeysPerTenant, idempotencyAnswerMaxBytes, sessionsPerTenant } = defaults.limits;
  expect([idempotencyKeysPerTenant, idempotencyAnswerMaxBytes, sessionsPerTenant]).toEqual([30_000, 8192, 20_000]);
  expect(() =>
    loadConfig({
      env: {
        TOKENVAULT_STORE: 'memory',
        TOKENVAULT_IDEMPOTENCY_KEYS_PER_TENANT: '-1',
        TOKENVAULT_IDEMPOTENCY_ANSWER_MAX_BYTES: 'x',
        TOKENVAULT_SESSIONS_PER_TENANT: '1.5',
      },
    }),
  ).toThrow(
    /TOKENVAULT_IDEMPOTENCY_ANSWER_MAX_BYTES[\s\S]*TOKENVAULT_IDEMPOTENCY_KEYS_PER_TENANT[\s\S]*TOKENVAULT_SESSIONS_PER_TENANT/,
  );
});

test('asynchronous reactor results per tenant: 2,000 kept results of 16 KiB by default', () => {
  const { resultsPerTenant, resultMaxBytes } = loadConfig({ env: { TOKENVAULT_STORE: 'memory' } }).asyncReactors;
  expect([resultsPerTenant, resultMaxBytes]).toEqual([2000, 16_384]);
  expect(() =>
    loadConfig({
      env: {
        TOKENVAULT_STORE: 'memory',
        TOKENVAULT_ASYNC_RESULTS_PER_TENANT: '-1',
        TOKENVAULT_ASYNC_RESULT_MAX_BYTES: 'x',
      },
    }),
  ).toThrow(/TOKENVAULT_ASYNC_RESULTS_PER_TENANT[\s\S]*TOKENVAULT_ASYNC_RESULT_MAX_BYTES/);
});

test('a JSON body may hold more members and elements than one token’s data: a bound at or below it is refused', () => {
  expect(loadConfig({ env: { TOKENVAULT_STORE: 'memory' } }).limits).toMatchObject({
    jsonMaxNodes: 20_000,
    tokenDataMaxNodes: 5000,
  });
  expect(() => loadConfig({ env: { TOKENVAULT_STORE: 'memory', TOKENVAULT_JSON_MAX_NODES: '5000' } })).toThrow(
    /TOKENVAULT_JSON_MAX_NODES must be larger than .*TOKENVAULT_TOKEN_DATA_MAX_NODES/,
  );
  expect(
    loadConfig({
      env: { TOKENVAULT_STORE: 'memory', TOKENVAULT_JSON_MAX_NODES: '100', TOKENVAULT_TOKEN_DATA_MAX_NODES: '50' },
    }).limits.jsonMaxNodes,
  ).toBe(100);
});

describe('a PostgreSQL store', () => {
  const password = 'hunter2-secret';
  const files = () => {
    const dir = mkdtempSync(join(tmpdir(), 'tv-config-pg-'));
    writeFileSync(join(dir, 'ca.pem'), '-----BEGIN CERTIFICATE-----\n');
    writeFileSync(join(dir, 'password'), `${password}\n`);
    return { ca: join(dir, 'ca.pem'), password: join(dir, 'password'), missing: join(dir, 'missing') };
  };
  /** The problems loadConfig reports, as one text (and the test fails when it reports none). */
  const problems = (env: Record<string, string>, argv: string[] = []): string => {
    try {
      loadConfig({ argv, env });
    } catch (error) {
      expect(error).toBeInstanceOf(ConfigError);
      return (error as Error).message;
    }
    throw new Error('loadConfig accepted it');
  };

  test('postgres:// and postgresql:// URLs, from the variable or the flag, with the pool, CA and password file', () => {
    const { ca, password: passwordFile } = files();
    const config = loadConfig({
      env: {
        TOKENVAULT_STORE: 'postgres://tokenvault@db.example:5433/vault?sslmode=verify-full',
        TOKENVAULT_POSTGRES_CA_FILE: ca,
        TOKENVAULT_POSTGRES_PASSWORD_FILE: passwordFile,
        TOKENVAULT_POSTGRES_POOL_SIZE: '4',
      },
    });
    expect(config.store).toEqual({
      kind: 'postgres',
      url: 'postgres://tokenvault@db.example:5433/vault?sslmode=verify-full',
      caFile: ca,
      passwordFile,
      poolSize: 4,
      requestTimeoutMs: 5000,
    });
    const flag = loadConfig({
      argv: ['--store', `postgresql://tokenvault:${password}@127.0.0.1/vault`, '--store-request-timeout-ms', '800'],
      env: { TOKENVAULT_STORE: 'etcd://a:2379' },
    });
    expect(flag.store).toEqual({
      kind: 'postgres',
      url: `postgresql://tokenvault:${password}@127.0.0.1/vault`,
      poolSize: 16,
      requestTimeoutMs: 800,
    });
  });

  test.each([
    ['postgres:///vault', /names no host/],
    ['postgres://db.example:5432/vault', /names no user/],
    ['postgres://tokenvault@db.example:5432/', /must name one database/],
    ['postgres://tokenvault@db.example:5432/a/b', /must name one database/],
    ['postgres://tokenvault@db.example:99999/vault', /not a valid postgres/],
    [
      'postgres://tokenvault@db.example/vault?sslmode=prefer',
      /sslmode must be one of disable, require, verify-ca, verify-full/,
    ],
    ['postgres://tokenvault@db.example/vault?sslrootcert=/ca.pem', /parameter "sslrootcert"; only sslmode is read/],
    [
      'postgress://tokenvault@db.example/vault',
      /must be 'memory', 'etcd:\/\/host:port\[,host:port...\]' or 'postgres:/,
    ],
  ])('%s is refused, naming the setting', (url, problem) => {
    const text = problems({ TOKENVAULT_STORE: url.replace('tokenvault@', `tokenvault:${password}@`) });
    expect(text).toMatch(/--store \/ TOKENVAULT_STORE: /);
    expect(text).toMatch(problem);
    // The URL can hold a password: no problem repeats it.
    expect(text).not.toContain(password);
  });

  test('a CA file needs sslmode verify-ca or verify-full, and must be readable', () => {
    const { ca, missing } = files();
    for (const url of ['postgres://u@h/d', 'postgres://u@h/d?sslmode=disable', 'postgres://u@h/d?sslmode=require']) {
      expect(problems({ TOKENVAULT_STORE: url, TOKENVAULT_POSTGRES_CA_FILE: ca })).toMatch(
        /--postgres-ca-file \/ TOKENVAULT_POSTGRES_CA_FILE: is read only with sslmode=verify-ca or verify-full/,
      );
    }
    expect(
      loadConfig({ env: { TOKENVAULT_STORE: 'postgres://u@h/d?sslmode=verify-ca', TOKENVAULT_POSTGRES_CA_FILE: ca } })
        .store,
    ).toMatchObject({ caFile: ca });
    expect(
      problems({ TOKENVAULT_STORE: 'postgres://u@h/d?sslmode=verify-ca', TOKENVAULT_POSTGRES_CA_FILE: missing }),
    ).toMatch(/TOKENVAULT_POSTGRES_CA_FILE: cannot read .*missing \(ENOENT\)/);
  });

  test('a password in the URL and a password file: one of them, and the password is never printed', () => {
    const { password: passwordFile, missing } = files();
    const text = problems({
      TOKENVAULT_STORE: `postgres://tokenvault:${password}@h/d`,
      TOKENVAULT_POSTGRES_PASSWORD_FILE: passwordFile,
    });
    expect(text).toMatch(
      /TOKENVAULT_POSTGRES_PASSWORD_FILE: the URL in --store \/ TOKENVAULT_STORE has a password too/,
    );
    expect(text).not.toContain(password);
    expect(
      problems({ TOKENVAULT_STORE: 'postgres://tokenvault@h/d', TOKENVAULT_POSTGRES_PASSWORD_FILE: missing }),
    ).toMatch(/TOKENVAULT_POSTGRES_PASSWORD_FILE: cannot read/);
  });

  test('pool size and request timeout are checked by name', () => {
    const text = problems({
      TOKENVAULT_STORE: 'postgres://u@h/d',
      TOKENVAULT_POSTGRES_POOL_SIZE: '0',
      TOKENVAULT_STORE_REQUEST_TIMEOUT_MS: '10',
    });
    expect(text).toMatch(/TOKENVAULT_POSTGRES_POOL_SIZE: must be a whole number from 1 to 1000/);
    expect(text).toMatch(/TOKENVAULT_STORE_REQUEST_TIMEOUT_MS: must be a whole number from 100/);
    // The etcd deadline is etcd's: a chart that sets it does not change PostgreSQL's.
    expect(
      loadConfig({ env: { TOKENVAULT_STORE: 'postgres://u@h/d', TOKENVAULT_ETCD_REQUEST_TIMEOUT_MS: '900' } }).store,
    ).toMatchObject({ requestTimeoutMs: 5000 });
  });

  test('TOKENVAULT_STORE_REQUEST_TIMEOUT_MS is the etcd deadline too, winning over TOKENVAULT_ETCD_REQUEST_TIMEOUT_MS', () => {
    const env = { TOKENVAULT_STORE: 'etcd://a:2379', TOKENVAULT_ETCD_REQUEST_TIMEOUT_MS: '900' };
    expect(loadConfig({ env }).store).toMatchObject({ requestTimeoutMs: 900 });
    expect(loadConfig({ env: { ...env, TOKENVAULT_STORE_REQUEST_TIMEOUT_MS: '700' } }).store).toMatchObject({
      requestTimeoutMs: 700,
    });
  });

  test('no token limit per tenant by default on PostgreSQL; 100,000 on etcd; a set one on either', () => {
    expect(loadConfig({ env: { TOKENVAULT_STORE: 'postgres://u@h/d' } }).perTenant.tokens).toBe(0);
    expect(loadConfig({ env: { TOKENVAULT_STORE: 'etcd://a:2379' } }).perTenant.tokens).toBe(100_000);
    expect(
      loadConfig({ env: { TOKENVAULT_STORE: 'postgres://u@h/d', TOKENVAULT_TOKENS_PER_TENANT: '500' } }).perTenant
        .tokens,
    ).toBe(500);
    expect(
      loadConfig({ argv: ['--tokens-per-tenant', '0'], env: { TOKENVAULT_STORE: 'etcd://a:2379' } }).perTenant.tokens,
    ).toBe(0);
  });

  test('the store settings of PostgreSQL are ignored by etcd and memory stores', () => {
    const config = loadConfig({ env: { TOKENVAULT_STORE: 'memory', TOKENVAULT_POSTGRES_POOL_SIZE: '4' } });
    expect(config.store).toEqual({ kind: 'memory' });
  });
});

test("the card fields' frame may be embedded only by origins listed one by one: not by default, nor with *", () => {
  const memory = { TOKENVAULT_STORE: 'memory' };
  const ancestors = (env: Record<string, string>) =>
    /frame-ancestors ([^;]+)/.exec(
      frameContentSecurityPolicy(loadConfig({ env: { ...memory, ...env } }).cors.origins),
    )![1];
  expect(ancestors({})).toBe("'none'");
  expect(ancestors({ TOKENVAULT_CORS_ORIGINS: '*' })).toBe("'none'");
  expect(ancestors({ TOKENVAULT_CORS_ORIGINS: 'none' })).toBe("'none'");
  expect(ancestors({ TOKENVAULT_CORS_ORIGINS: 'https://shop.example, https://*.shop.example' })).toBe(
    'https://shop.example https://*.shop.example',
  );
});
