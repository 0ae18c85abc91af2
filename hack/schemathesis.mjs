#!/usr/bin/env node
// Schemathesis (property-based and stateful API tests from the OpenAPI document) against `tokenvault dev` built in
// dist/: zero 5xx and zero answers the document does not allow. docs/api.md, "API contract".
//   hack/schemathesis.mjs [--max-examples N] [--seed N]
// Installs the pinned schemathesis into a virtualenv under ~/.cache/tokenvault (once), starts dev on a free loopback
// port, makes the keys each part of the interface needs, runs schemathesis with a per-operation key, stops dev.
// Prints "schemathesis: passed" or "schemathesis: failed" last; exits non-zero on failures.
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { homedir, tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { parseArgs } from 'node:util';

const SCHEMATHESIS = '4.32.5';
/** The development tenant's fixed id (src/server/dev.ts). */
const DEV_TENANT_ID = 'a7d3f1c2-0d5e-4b8a-9c61-2f4e8b7d0001';
const root = new URL('..', import.meta.url).pathname;
const { values } = parseArgs({
  options: {
    'max-examples': { type: 'string', default: '15' },
    // A wall-clock bound for both passes together; past it the run stops and fails.
    'timeout-seconds': { type: 'string', default: '900' },
    seed: { type: 'string', default: '17' },
    // Keep the reports (JUnit, and HAR: every request and answer) in this directory.
    'report-dir': { type: 'string' },
  },
});

const cache = process.env.XDG_CACHE_HOME
  ? join(process.env.XDG_CACHE_HOME, 'tokenvault')
  : join(homedir(), '.cache', 'tokenvault');
const venv = join(cache, `schemathesis-${SCHEMATHESIS}`);
const st = join(venv, 'bin', 'st');

function run(command, args) {
  const result = spawnSync(command, args, { stdio: 'inherit' });
  if (result.status !== 0) throw new Error(`${command} ${args.join(' ')} failed`);
}

if (!existsSync(st)) {
  console.log(`installing schemathesis ${SCHEMATHESIS} into ${venv}`);
  run('python3', ['-m', 'venv', venv]);
  run(join(venv, 'bin', 'pip'), ['install', '--quiet', '--disable-pip-version-check', `schemathesis==${SCHEMATHESIS}`]);
}

const dev = spawn(process.execPath, ['--no-node-snapshot', join(root, 'dist/cli.js'), 'dev'], {
  env: {
    PATH: process.env.PATH ?? '',
    // Port 0: dev binds a free port itself and prints it (a port chosen free here could be taken before dev binds it).
    TOKENVAULT_PORT: '0',
    TOKENVAULT_LOG_LEVEL: 'warn',
    // Schemathesis sends thousands of requests from one key; the limits are tested elsewhere (rate-limits.test.ts).
    TOKENVAULT_RATE_LIMIT_API_PER_KEY: '0',
    TOKENVAULT_RATE_LIMIT_API_PER_TENANT: '0',
    TOKENVAULT_RATE_LIMIT_CALLS_PER_KEY: '0',
    TOKENVAULT_RATE_LIMIT_CALLS_PER_TENANT: '0',
  },
  stdio: ['ignore', 'pipe', 'pipe'],
});
let devErrors = '';
dev.stderr.on('data', (chunk) => (devErrors = (devErrors + chunk).slice(-20_000)));
const stopDev = async () => {
  if (dev.exitCode !== null || dev.signalCode !== null) return;
  const exited = new Promise((resolve) => dev.once('exit', resolve));
  dev.kill('SIGTERM');
  await exited;
};

const work = mkdtempSync(join(tmpdir(), 'tokenvault-schemathesis-'));
let status = 1;
try {
  const banner = await new Promise((resolve, reject) => {
    const fields = {};
    const timer = setTimeout(() => reject(new Error(`no banner within 30 s: ${devErrors}`)), 30_000);
    dev.once('exit', (code) => reject(new Error(`tokenvault dev exited with ${code}: ${devErrors}`)));
    createInterface({ input: dev.stdout }).on('line', (line) => {
      const field = /^ {2}(URL|Management key|Operator key):\s+(\S+)$/.exec(line);
      if (field) fields[field[1]] = field[2];
      if (fields.URL && fields['Management key'] && fields['Operator key']) {
        clearTimeout(timer);
        resolve(fields);
      }
    });
  });
  const base = banner.URL;

  // The run's keys belong to applications the operator creates in the development tenant as if a Kubernetes object
  // declared them (BT-MANAGED-BY): the tenant's own keys get 409 changing, regenerating or deleting them, so the run
  // cannot revoke the keys it runs with (it finds their ids in GET /applications and tries).
  const create = async (body) => {
    const response = await fetch(`${base}/applications`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        'bt-api-key': banner['Operator key'],
        'bt-tenant-id': DEV_TENANT_ID,
        'bt-managed-by': `Application/schemathesis/${body.type}`,
      },
      body: JSON.stringify(body),
    });
    if (response.status !== 201) throw new Error(`creating ${body.name}: ${response.status} ${await response.text()}`);
    return (await response.json()).key;
  };
  const permissions = await (
    await fetch(`${base}/permissions`, { headers: { 'bt-api-key': banner['Management key'] } })
  ).json();
  const of = (type) => permissions.filter((p) => p.application_types.includes(type)).map((p) => p.type);
  // Every management permission but tenant:delete: DELETE /tenants/self would end the run (403 is its answer here).
  const managementKey = await create({
    name: 'schemathesis management',
    type: 'management',
    permissions: of('management').filter((p) => p !== 'tenant:delete'),
  });
  const privateKey = await create({
    name: 'schemathesis private',
    type: 'private',
    permissions: of('private'),
    rules: [{ priority: 1, container: '/', transform: 'reveal', permissions: of('private') }],
  });

  const publicKey = await create({ name: 'schemathesis public', type: 'public', permissions: of('public') });
  const env = {
    ...process.env,
    TOKENVAULT_ST_MANAGEMENT_KEY: managementKey,
    TOKENVAULT_ST_PRIVATE_KEY: privateKey,
    TOKENVAULT_ST_PUBLIC_KEY: publicKey,
    TOKENVAULT_ST_OPERATOR_KEY: banner['Operator key'],
    // hack/schemathesis_hooks.py: a fresh BT-IDEMPOTENCY-KEY per call, as clients send.
    SCHEMATHESIS_HOOKS: 'schemathesis_hooks',
    PYTHONPATH: join(root, 'hack'),
  };
  // Two passes: the tenant's interface first, then the operator's, which can (and does) delete or re-point the
  // development tenant the first pass works in.
  const passes = [
    ['tenant', ['--exclude-tag', 'Operator']],
    ['operator', ['--include-tag', 'Operator']],
  ];
  const totals = { operations: 0, cases: 0, failures: 0, errors: 0 };
  const started = Date.now();
  let failed = false;
  for (const [name, filter] of passes) {
    const junitPath = join(work, `junit-${name}.xml`);
    const args = [
      '--config-file',
      join(root, 'hack/schemathesis.toml'),
      'run',
      // The document as the server serves it (docs/openapi.json is the same: test/unit/openapi.test.ts).
      `${base}/openapi.json`,
      ...filter,
      // The proxy forwards to destinations of the caller's choosing; test/integration/proxy*.test.ts and
      // ssrf.test.ts cover it against real destinations.
      '--exclude-tag',
      'Proxy',
      '--max-examples',
      values['max-examples'],
      '--seed',
      values.seed,
      // One worker: the order of requests follows the seed, and Schemathesis 4.32.5 has a thread race in its
      // coverage phase (an internal "AST constructor recursion depth mismatch" error) with more.
      '--workers',
      '1',
      '--request-timeout',
      '10',
      '--suppress-health-check',
      'all',
      '--report',
      values['report-dir'] ? 'junit,har' : 'junit',
      '--report-dir',
      values['report-dir'] ?? work,
      '--report-junit-path',
      junitPath,
      '--no-color',
    ];
    console.log(`schemathesis pass "${name}"`);
    const child = spawn(st, args, { stdio: ['ignore', 'pipe', 'inherit'], cwd: work, env });
    let output = '';
    child.stdout.on('data', (chunk) => {
      process.stdout.write(chunk);
      output = (output + chunk).slice(-100_000);
    });
    const left = Number(values['timeout-seconds']) * 1000 - (Date.now() - started);
    const timer = setTimeout(
      () => {
        console.log(`schemathesis: over --timeout-seconds ${values['timeout-seconds']}; stopping it`);
        child.kill('SIGTERM');
      },
      Math.max(left, 1),
    );
    const code = await new Promise((resolve) => child.once('exit', (c) => resolve(c ?? 1)));
    clearTimeout(timer);
    if (code !== 0) failed = true;
    const junit = existsSync(junitPath) ? readFileSync(junitPath, 'utf8') : '';
    const suite = /<testsuite [^>]*>/.exec(junit)?.[0] ?? '';
    const attr = (key) => Number(new RegExp(`\\b${key}="(\\d+)"`).exec(suite)?.[1] ?? 0);
    totals.operations += Number(/Operations:\s+(\d+) selected/.exec(output)?.[1] ?? 0);
    totals.failures += attr('failures');
    totals.errors += attr('errors');
    totals.cases += Number(/(\d+) generated/.exec(output)?.[1] ?? 0);
  }
  const seconds = Math.round((Date.now() - started) / 1000);
  console.log(
    `schemathesis ${SCHEMATHESIS}: ${totals.operations} operations, ${totals.cases} test cases, ${totals.failures} failing, ${totals.errors} errors, ${seconds} s (seed ${values.seed}, at most ${values['max-examples']} examples an operation a phase)`,
  );
  status = failed ? 1 : 0;
} catch (error) {
  console.error(String(error?.stack ?? error));
} finally {
  await stopDev();
  rmSync(work, { recursive: true, force: true });
}
console.log(`schemathesis: ${status === 0 ? 'passed' : 'failed'}`);
process.exit(status === 0 ? 0 : 1);
