// The repository's root, found from this file wherever it runs: from test/support under jest, or compiled into
// dist-bench/test/support for the benchmarks, where a fixed '../..' would land inside dist-bench.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

function findRepoRoot(from: string): string {
  for (let dir = from; dir !== path.dirname(dir); dir = path.dirname(dir)) {
    try {
      if (JSON.parse(readFileSync(path.join(dir, 'package.json'), 'utf8')).name === 'tokenvault') return dir;
    } catch {
      // not here
    }
  }
  throw new Error(`no tokenvault package.json above ${from}`);
}

export const repoRoot = findRepoRoot(path.dirname(fileURLToPath(import.meta.url)));
