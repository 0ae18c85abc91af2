// A fake third-party API (a "payment processor") on loopback HTTPS for reactor tests, built on https.ts: routes keyed
// by "METHOD /path" answer JSON; every request that arrived is kept (headers, raw text, body parsed from JSON or a
// form) so a test can show what the reactor's code really sent: detokenized card data, keys from configuration.
import type { IncomingHttpHeaders } from 'node:http';
import { startHttpsServer } from './https.js';

export interface Arrived {
  method: string;
  path: string;
  query: URLSearchParams;
  headers: IncomingHttpHeaders;
  text: string;
  /** JSON or form bodies parsed (a form into a flat object of its fields); anything else is the text. */
  body: any;
}

export interface Reply {
  status?: number;
  body?: unknown;
  headers?: Record<string, string>;
}

export type Route = (arrived: Arrived) => Reply;

export interface Processor {
  /** `https://localhost:<port>` (allow-list `localhost` and trust the run's CA to reach it). */
  url: string;
  arrived: Arrived[];
  /** The last request that arrived on `path`. */
  last(path: string): Arrived | undefined;
  close(): Promise<void>;
}

function parse(text: string, contentType: string | undefined): unknown {
  if (text === '') return undefined;
  if (contentType?.includes('json')) return JSON.parse(text);
  if (contentType?.includes('x-www-form-urlencoded')) return Object.fromEntries(new URLSearchParams(text));
  return text;
}

export async function startProcessor(routes: Record<string, Route>): Promise<Processor> {
  const arrived: Arrived[] = [];
  const server = await startHttpsServer((request, response) => {
    let text = '';
    request.setEncoding('utf8');
    request.on('data', (chunk: string) => (text += chunk));
    request.on('end', () => {
      const url = new URL(request.url ?? '/', 'https://processor');
      const entry: Arrived = {
        method: request.method ?? '',
        path: url.pathname,
        query: url.searchParams,
        headers: request.headers,
        text,
        body: parse(text, request.headers['content-type']),
      };
      arrived.push(entry);
      const route = routes[`${entry.method} ${entry.path}`];
      const reply: Reply = route
        ? route(entry)
        : { status: 404, body: { error: { type: 'invalid_request_error', message: `no route ${entry.path}` } } };
      response.writeHead(reply.status ?? 200, { 'content-type': 'application/json', ...reply.headers });
      response.end(reply.body === undefined ? '' : JSON.stringify(reply.body));
    });
  });
  return {
    url: server.url,
    arrived,
    last: (path) => [...arrived].reverse().find((a) => a.path === path),
    close: () => server.close(),
  };
}
