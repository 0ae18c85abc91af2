// pino, with redaction as a safety net: handlers log no secrets on purpose, and these paths catch what slips in.
// Request bodies are never logged at all (they hold token data and reactor args).
import pino, { type DestinationStream, type Logger } from 'pino';
import type { LogLevel } from '../config/config.js';

export const REDACTED_PATHS = [
  'req.headers["bt-api-key"]',
  'req.headers["bt-proxy-key"]',
  'req.headers.authorization',
  'req.headers.cookie',
  'key',
  'session_key',
  'nonce',
  'body',
  'data',
  'args',
  'configuration',
  '*.key',
  '*.session_key',
  '*.nonce',
  '*.body',
  '*.data',
  '*.args',
  '*.configuration',
];

export function createLogger(level: LogLevel, destination?: DestinationStream): Logger {
  return pino(
    {
      level,
      base: { service: 'tokenvault' },
      redact: { paths: REDACTED_PATHS, censor: '[redacted]' },
      timestamp: pino.stdTimeFunctions.isoTime,
    },
    destination,
  );
}

export type { Logger };
