// Reactor code checks that need no sandbox. Compiling (never running) the code in node:vm finds syntax errors at
// write time, so a formula that can never run is refused with a 422 when it is saved, not when it is first invoked.
import { Script } from 'node:vm';
import { createHash } from 'node:crypto';
import { LRUCache } from 'lru-cache';
import { Errors } from '../../errors/registry.js';

/** The same wrapper the sandbox evaluates the code in, so both agree on what compiles. */
export function wrapModule(code: string): string {
  return `(function (module, exports, require) {\n${code}\n})`;
}

/** 422 when the code does not compile. */
export function assertCompiles(code: string, field = 'code'): void {
  try {
    new Script(wrapModule(code), { filename: 'reactor.js' });
  } catch (error) {
    const message = error instanceof SyntaxError ? error.message : 'the code does not compile';
    throw new Errors.Unprocessable({ detail: 'The code does not compile.', errors: { [field]: [message] } });
  }
}

/** Hashes of recent code: every invocation names its code by hash, and the same few codes run again and again. */
const hashes = new LRUCache<string, string>({ max: 256 });

export function codeHash(code: string): string {
  let hash = hashes.get(code);
  if (hash === undefined) {
    hash = createHash('sha256').update(code).digest('hex');
    hashes.set(code, hash);
  }
  return hash;
}
