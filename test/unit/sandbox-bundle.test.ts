// The prelude the isolates run is generated from src/runtime/sandbox-code/ into the committed
// src/runtime/prelude-bundle.ts (hack/build-sandbox.mjs): the committed file must be what the sources give today.
import { describe, expect, test } from '@jest/globals';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const SCRIPT = 'hack/build-sandbox.mjs';
const BUNDLE = 'src/runtime/prelude-bundle.ts';

function check(...args: string[]) {
  return spawnSync(process.execPath, [SCRIPT, '--check', ...args], { encoding: 'utf8', timeout: 30_000 });
}

describe('the sandbox bundle', () => {
  test('is fresh: src/runtime/prelude-bundle.ts is what the sandbox sources bundle to (`make sandbox` rewrites it)', () => {
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
