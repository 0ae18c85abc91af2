// The prelude the isolates run is generated from src/runtime/worker/sandbox-code/ into the committed
// src/runtime/worker/prelude-bundle.ts (hack/build-sandbox.mjs): the committed file must be what the sources give today.
import { afterAll, describe, expect, test } from '@jest/globals';
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SandboxPool } from '../../src/runtime/worker/sandbox.js';

const SCRIPT = 'hack/build-sandbox.mjs';
const BUNDLE = 'src/runtime/worker/prelude-bundle.ts';

function check(...args: string[]) {
  return spawnSync(process.execPath, [SCRIPT, '--check', ...args], { encoding: 'utf8', timeout: 30_000 });
}

describe('the sandbox bundle', () => {
  test('is fresh: src/runtime/worker/prelude-bundle.ts is what the sandbox sources bundle to (`make sandbox` rewrites it)', () => {
    const result = check();
    expect(result.stderr).toBe('');
    expect(result.status).toBe(0);
  });

  test('the check fails, naming the fix, when the bundle differs from the sources', () => {
    const dir = mkdtempSync(join(tmpdir(), 'tokenvault-bundle-'));
    try {
      const stale = join(dir, 'prelude-bundle.ts');
      writeFileSync(stale, readFileSync(BUNDLE, 'utf8').replace('Digest already called', 'Digest was called'));
      const result = check('--out', stale);
      expect(result.status).toBe(1);
      expect(result.stderr).toContain('is stale: run `make sandbox`');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('the bundled prelude in a real isolate', () => {
  const pool = new SandboxPool({ cacheSize: 2, limits: { cpuMs: 500, timeoutMs: 5000, memoryMb: 32 } });
  afterAll(() => pool.close());

  test("keeps its own declarations off the global object, and the names the bundler would rename are Node's", async () => {
    // The bundle's top level (the entry, the captured intrinsics, the host functions) lives in a function scope: reactor
    // code reaching `entry` could answer host operations itself. esbuild renames `require` and `Buffer`; their
    // functions must still carry those names.
    const code = `module.exports = async () => ({
      leaked: ['entry', 'settle', 'hostCall', 'hostSync', 'JSONparse', 'ReflectApply', 'connectHost', '__tv_call', '__tv_sync', '__tv_prelude']
        .filter((name) => name in globalThis),
      names: [require.name, Buffer.name, URL.name, require('buffer').Buffer.name, Buffer.from('a').constructor.name],
      error: (() => { try { Buffer.byteLength(Buffer); } catch (e) { return e.code; } })(),
    })`;
    const result = await pool.invoke({
      tenantId: 'tenant-bundle',
      codeHash: createHash('sha256').update(code).digest('hex'),
      code,
      args: {},
      configuration: {},
      bt: null,
      kind: 'reactor',
    });
    expect(result.ok && result.result).toEqual({
      leaked: [],
      names: ['require', 'Buffer', 'URL', 'Buffer', 'Buffer'],
      error: 'ERR_INVALID_ARG_TYPE',
    });
  });
});
