// A load client for fault and shutdown tests: real HTTP requests over kept-alive connections (as SDKs make them),
// each with a deadline, and what came back sorted into what a client can tell apart: a status (with Retry-After on a
// 503), or no answer — refused (nothing was sent), reset (the connection broke after sending), or timed out.
import http from 'node:http';

export type Failure = 'refused' | 'reset' | 'timeout';

type Answer =
  | { status: number; retryAfter?: string; body: any; failure?: undefined }
  | { failure: Failure; detail: string; status?: undefined; body?: undefined; retryAfter?: undefined };

/** What came back, and after how many ms. */
export type Outcome = Answer & { ms: number };

export interface RequestOptions {
  headers?: Record<string, string>;
  json?: unknown;
  timeoutMs: number;
  agent?: http.Agent;
}

export function request(base: string, method: string, path: string, options: RequestOptions): Promise<Outcome> {
  const headers: Record<string, string> = { ...options.headers };
  const body = options.json === undefined ? undefined : Buffer.from(JSON.stringify(options.json));
  if (body) {
    headers['Content-Type'] = 'application/json';
    headers['Content-Length'] = String(body.length);
  }
  const { hostname, port } = new URL(base);
  const started = Date.now();
  return new Promise((resolve) => {
    let settled = false;
    const settle = (outcome: Answer) => {
      if (settled) return;
      settled = true;
      resolve({ ...outcome, ms: Date.now() - started });
    };
    const req = http.request(
      { hostname, port, path, method, headers, agent: options.agent, signal: AbortSignal.timeout(options.timeoutMs) },
      (response) => {
        const chunks: Buffer[] = [];
        response.on('data', (chunk: Buffer) => chunks.push(chunk));
        response.on('error', (error) => settle(failureOf(error)));
        response.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          let parsed: unknown = text;
          try {
            parsed = text === '' ? undefined : JSON.parse(text);
          } catch {
            // not JSON
          }
          const retryAfter = response.headers['retry-after'];
          settle({ status: response.statusCode ?? 0, retryAfter, body: parsed });
        });
      },
    );
    req.on('error', (error) => settle(failureOf(error)));
    req.end(body);
  });
}

function failureOf(error: Error): Answer {
  const code = (error as NodeJS.ErrnoException).code;
  if (code === 'ECONNREFUSED') return { failure: 'refused', detail: error.message };
  if (error.name === 'AbortError' || code === 'ABORT_ERR') return { failure: 'timeout', detail: error.message };
  return { failure: 'reset', detail: `${code ?? error.name}: ${error.message}` };
}

/** Requests, acknowledged (2xx) answers, and everything else by status or failure. */
export class Tally {
  requests = 0;
  acknowledged = 0;
  readonly errors: Record<string, number> = {};
  /** The longest a 503 took to come back, in ms. */
  slowest503Ms = 0;
  /** 503s that came without Retry-After. */
  unavailableWithoutRetryAfter = 0;
  /** What the first few unexpected answers were, for a failure message. */
  readonly samples: string[] = [];

  add(what: string, outcome: Outcome): void {
    this.requests += 1;
    if (outcome.status !== undefined && outcome.status >= 200 && outcome.status < 300) {
      this.acknowledged += 1;
      return;
    }
    const key = outcome.failure ?? String(outcome.status);
    this.errors[key] = (this.errors[key] ?? 0) + 1;
    if (outcome.status === 503) this.slowest503Ms = Math.max(this.slowest503Ms, outcome.ms);
    const bare503 = outcome.status === 503 && !outcome.retryAfter;
    if (bare503) this.unavailableWithoutRetryAfter += 1;
    if (this.samples.length < 10 && (outcome.status !== 503 || bare503))
      this.samples.push(
        `${what}: ${outcome.failure ?? outcome.status} ${JSON.stringify(outcome.failure ? outcome.detail : outcome.body)}`,
      );
  }

  /** Statuses of the errors, failures left out. */
  statuses(): number[] {
    return Object.keys(this.errors)
      .filter((key) => /^\d+$/.test(key))
      .map(Number);
  }
}
