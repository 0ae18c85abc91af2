import { expect, test } from '@jest/globals';
import { Writable } from 'node:stream';
import { generateApiKey } from '../../src/auth/api-keys.js';
import { createLogger } from '../../src/observability/logger.js';

test('keys, nonces, bodies and token data are redacted from log lines', () => {
  const lines: string[] = [];
  const sink = new Writable({
    write(chunk, _enc, done) {
      lines.push(String(chunk));
      done();
    },
  });
  const logger = createLogger('info', sink);
  const key = generateApiKey();
  logger.info(
    {
      req: { headers: { 'bt-api-key': key } },
      session_key: key,
      nonce: 'n0nce',
      body: { number: '4242424242424242' },
      application: { key },
    },
    'x',
  );
  const text = lines.join('');
  expect(text).not.toContain(key);
  expect(text).not.toContain('n0nce');
  expect(text).not.toContain('4242424242424242');
  expect(text).toContain('[redacted]');
});
