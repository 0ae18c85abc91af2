// Talking to the API under test: a keep-alive connection pool for the measured requests, and the set-up calls
// (a tenant through the operator API, then an application with the benchmark's rules).
import { Pool } from 'undici';

/** One keep-alive connection per concurrent client, no pipelining: each worker behaves like one HTTP client. */
export function apiPool(url: string, connections: number): Pool {
  return new Pool(url, { connections, pipelining: 1, keepAliveTimeout: 60_000 });
}

export interface Sent {
  method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
  path: string;
  key: string;
  /** A JSON body, already serialized (benchmarks prepare bodies before the clock starts). */
  body?: string;
}

/** One request; the answer's body as text, or an error naming the status when it is not `expected`. */
export async function send(pool: Pool, sent: Sent, expected: number): Promise<string> {
  const headers: Record<string, string> = { 'bt-api-key': sent.key };
  if (sent.body !== undefined) headers['content-type'] = 'application/json';
  const { statusCode, body } = await pool.request({ method: sent.method, path: sent.path, headers, body: sent.body });
  const text = await body.text();
  if (statusCode !== expected)
    throw new Error(`${sent.method} ${sent.path} answered ${statusCode}: ${text.slice(0, 300)}`);
  return text;
}

async function post(url: string, path: string, key: string, body: unknown): Promise<any> {
  const response = await fetch(`${url}${path}`, {
    method: 'POST',
    headers: { 'bt-api-key': key, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  const text = await response.text();
  if (response.status !== 201) throw new Error(`POST ${path} answered ${response.status}: ${text.slice(0, 500)}`);
  return JSON.parse(text);
}

export interface BenchTenant {
  tenantId: string;
  managementKey: string;
  /** The key of a private application created with the given rules. */
  key: string;
}

/** A new tenant (operator key) and a private application in it with these access rules. */
export async function createTenantWithApplication(
  url: string,
  operatorKey: string,
  rules: unknown[],
): Promise<BenchTenant> {
  const tenant = await post(url, '/admin/tenants', operatorKey, { name: `bench-${Date.now()}` });
  const managementKey = tenant.application.key as string;
  const application = await post(url, '/applications', managementKey, { name: 'bench', type: 'private', rules });
  return { tenantId: tenant.tenant.id as string, managementKey, key: application.key as string };
}
