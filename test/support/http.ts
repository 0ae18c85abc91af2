// A tiny HTTP client for tests: real requests to a real server, answers parsed as the caller would see them.
export interface Answer<T = any> {
  status: number;
  headers: Headers;
  body: T;
}

export interface CallOptions {
  key?: string;
  body?: unknown;
  /** A raw body sent as is (for malformed-JSON tests). */
  raw?: string;
  headers?: Record<string, string>;
}

export async function call<T = any>(
  base: string,
  method: string,
  path: string,
  options: CallOptions = {},
): Promise<Answer<T>> {
  const headers: Record<string, string> = { ...options.headers };
  if (options.key !== undefined) headers['BT-API-KEY'] = options.key;
  let body: string | undefined;
  if (options.raw !== undefined) {
    body = options.raw;
    headers['Content-Type'] ??= 'application/json';
  } else if (options.body !== undefined) {
    body = JSON.stringify(options.body);
    headers['Content-Type'] ??= 'application/json';
  }
  const response = await fetch(`${base}${path}`, { method, headers, body });
  const text = await response.text();
  let parsed: unknown = text;
  if ((response.headers.get('content-type') ?? '').includes('json') && text !== '') parsed = JSON.parse(text);
  return { status: response.status, headers: response.headers, body: parsed as T };
}

/** A client bound to one base URL and key. */
export function client(base: string, key?: string) {
  const bound =
    (method: string) =>
    (path: string, options: CallOptions = {}) =>
      call(base, method, path, { key, ...options });
  return {
    key: () => key!,
    get: bound('GET'),
    post: bound('POST'),
    put: bound('PUT'),
    patch: bound('PATCH'),
    delete: bound('DELETE'),
  };
}
