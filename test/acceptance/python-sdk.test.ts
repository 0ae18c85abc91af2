// Acceptance: Basis Theory's Python SDK (basistheoryclient, in the virtual environment hack/python-sdk.sh makes; its
// interpreter in TOKENVAULT_PYTHON_SDK) against `tokenvault dev`. The cases are pytest's, under test/python; this file
// starts the vault, runs pytest once, and reports each pytest case as a jest test of its own, with pytest's failure
// text, so `make test` counts them one by one.
import { execFileSync, spawn } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startDevServer, type DevServer } from '../support/dev-server.js';

const python = process.env.TOKENVAULT_PYTHON_SDK;
const DIR = 'test/python';
// No .pytest_cache or __pycache__ in the tree.
const PYTEST = ['-m', 'pytest', '-p', 'no:cacheprovider', DIR];
const env = (extra: Record<string, string> = {}) => ({
  PATH: process.env.PATH ?? '',
  PYTHONDONTWRITEBYTECODE: '1',
  ...extra,
});

/** pytest's case ids (`test_sdk.py::test_x[param]`), collected when this file loads so each becomes a jest test. */
function collect(): string[] {
  const out = execFileSync(python!, [...PYTEST, '--collect-only', '-q'], { env: env(), encoding: 'utf8' });
  return out
    .split('\n')
    .filter((line) => line.includes('::'))
    .map((line) => line.trim().replace(/^test\/python\//, ''));
}

interface Outcome {
  failure?: string;
}

/** Each case's outcome from pytest's JUnit XML, keyed as collect() names them. */
function outcomes(xml: string): Map<string, Outcome> {
  const unescape = (s: string) =>
    s
      .replace(/&lt;/g, '<')
      .replace(/&gt;/g, '>')
      .replace(/&quot;/g, '"')
      .replace(/&#10;/g, '\n')
      .replace(/&amp;/g, '&');
  const found = new Map<string, Outcome>();
  for (const match of xml.matchAll(/<testcase\b([^>]*?)(\/>|>([\s\S]*?)<\/testcase>)/g)) {
    const attrs = Object.fromEntries([...match[1].matchAll(/(\w+)="([^"]*)"/g)].map((a) => [a[1], unescape(a[2])]));
    const file = `${attrs.classname.split('.').pop()}.py`;
    const body = match[3] ?? '';
    const failed =
      /<(failure|error)\b[^>]*?(?:message="([^"]*)")?[^>]*>([\s\S]*?)<\/\1>|<(failure|error)\b[^>]*\/>/.exec(body);
    const skipped = /<skipped\b/.test(body);
    found.set(`${file}::${attrs.name}`, {
      failure: failed
        ? unescape(failed[3] ?? failed[2] ?? 'failed')
        : skipped
          ? 'skipped (no case may be skipped)'
          : undefined,
    });
  }
  return found;
}

if (!python) {
  test('the Python SDK tier needs TOKENVAULT_PYTHON_SDK', () => {
    throw new Error('set TOKENVAULT_PYTHON_SDK=$(hack/python-sdk.sh) (make test does)');
  });
} else {
  const cases = collect();
  let dev: DevServer;
  let results: Map<string, Outcome>;
  let log = '';

  beforeAll(async () => {
    dev = await startDevServer({ TOKENVAULT_PROXY_ALLOWED_HOSTS: 'localhost' });
    const dir = await mkdtemp(join(tmpdir(), 'tokenvault-pytest-'));
    try {
      const xml = join(dir, 'results.xml');
      const child = spawn(python, [...PYTEST, '-q', `--junitxml=${xml}`], {
        env: env({ TOKENVAULT_URL: dev.baseUrl, TOKENVAULT_MANAGEMENT_KEY: dev.rootKey }),
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      child.stdout.on('data', (chunk) => (log += chunk));
      child.stderr.on('data', (chunk) => (log += chunk));
      await new Promise((resolve) => child.once('exit', resolve));
      results = outcomes(await readFile(xml, 'utf8'));
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  }, 180_000);

  afterAll(async () => {
    await dev?.stop();
  });

  test('pytest collected the cases and reported each of them', () => {
    expect(cases.length).toBeGreaterThan(20);
    expect([...results.keys()].sort()).toEqual([...cases].sort());
  });

  test.each(cases)('%s', (id) => {
    const outcome = results.get(id);
    if (!outcome) throw new Error(`pytest did not report ${id}; its output:\n${log}`);
    if (outcome.failure) throw new Error(outcome.failure);
  });
}
