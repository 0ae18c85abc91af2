// Helpers for proxy tests: a raw HTTP client (node:http, so any header can be sent, hop-by-hop ones included, and
// the answer's bytes are kept exactly) and an echoing destination handler.
import http from 'node:http';
import type { IncomingMessage, ServerResponse } from 'node:http';

export interface Sent {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: Buffer;
  json(): any;
}

export interface SendOptions {
  headers?: Record<string, string>;
  /** Sent as JSON with Content-Type application/json. */
  json?: unknown;
  body?: string | Buffer;
}

export function send(base: string, method: string, path: string, options: SendOptions = {}): Promise<Sent> {
  const headers: Record<string, string> = { ...options.headers };
  let body: Buffer | undefined;
  if (options.json !== undefined) {
    body = Buffer.from(JSON.stringify(options.json));
    if (!Object.keys(headers).some((h) => h.toLowerCase() === 'content-type'))
      headers['Content-Type'] = 'application/json';
  } else if (options.body !== undefined) {
    body = Buffer.isBuffer(options.body) ? options.body : Buffer.from(options.body);
  }
  if (body && !Object.keys(headers).some((h) => h.toLowerCase() === 'content-length'))
    headers['Content-Length'] = String(body.length);
  return new Promise((resolve, reject) => {
    // The path is sent exactly as given (a URL string would be normalized: dot segments, backslashes).
    const { hostname, port } = new URL(base);
    const request = http.request({ hostname, port, path, method, headers, agent: false }, (response) => {
      const chunks: Buffer[] = [];
      response.on('data', (chunk: Buffer) => chunks.push(chunk));
      response.on('end', () => {
        const data = Buffer.concat(chunks);
        resolve({
          status: response.statusCode ?? 0,
          headers: response.headers,
          body: data,
          json: () => JSON.parse(data.toString('utf8')),
        });
      });
      response.on('error', reject);
    });
    request.on('error', reject);
    request.end(body);
  });
}

/** Answers with what arrived: method, url, headers, and the body as text. */
export function echo(req: IncomingMessage, res: ServerResponse, body: Buffer): void {
  const answer = JSON.stringify({
    method: req.method,
    url: req.url,
    headers: req.headers,
    body: body.toString('utf8'),
  });
  res.writeHead(200, { 'content-type': 'application/json', 'x-echo': 'yes' });
  res.end(answer);
}
