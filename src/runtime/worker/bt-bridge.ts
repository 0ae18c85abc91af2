// The host side of reactor code's `bt` client: each call becomes one HTTP request from the worker to the API
// (TOKENVAULT_API_URL) with the reactor application's key, which never enters the sandbox. Request and response
// shapes follow @basis-theory/basis-theory-js 4.x: token bodies are snake_cased on the way out and camelCased on the
// way back except for `data` and `metadata` (the token's own content); `tokenize` and `detokenize` pass through raw.
// Failures come back as `{status, data, message}` for the sandbox to throw as a BasisTheoryApiError, as the SDK
// does (status -1 when no answer arrived).
import { Agent, request as undiciRequest, type Dispatcher } from 'undici';

export interface BtCall {
  op: string;
  params: Record<string, unknown> | null;
}

export interface BtAnswer {
  status: number;
  data: unknown;
  message?: string;
}

/** Per-call options of basis-theory-js (the ones that mean something here). */
interface CallOptions {
  apiKey?: unknown;
  idempotencyKey?: unknown;
  correlationId?: unknown;
}

interface Plan {
  method: Dispatcher.HttpMethod;
  path: string;
  body?: unknown;
  contentType?: string;
  /** tokens: camelCase the answer except data and metadata. */
  camel: boolean;
}

export class BtBridge {
  private readonly agent: Agent;

  constructor(
    private readonly apiUrl: string | undefined,
    options: { timeoutMs?: number; connections?: number } = {},
  ) {
    const timeout = options.timeoutMs ?? 30_000;
    this.agent = new Agent({ connections: options.connections ?? 32, headersTimeout: timeout, bodyTimeout: timeout });
  }

  async call(apiKey: string, call: BtCall, signal: AbortSignal): Promise<BtAnswer> {
    if (!this.apiUrl)
      return {
        status: -1,
        data: null,
        message: 'the worker has no API URL configured (TOKENVAULT_API_URL), so bt cannot reach the vault',
      };
    const params = call.params ?? {};
    const options = (isObject(params.options) ? params.options : {}) as CallOptions;
    if (options.apiKey !== undefined && options.apiKey !== apiKey) {
      return { status: -1, data: null, message: "reactors may only use their own application's key" };
    }
    let plan: Plan;
    try {
      plan = planFor(call.op, params);
    } catch (error) {
      return { status: -1, data: null, message: (error as Error).message };
    }
    const headers: Record<string, string> = { 'bt-api-key': apiKey, accept: 'application/json' };
    if (typeof options.idempotencyKey === 'string') headers['bt-idempotency-key'] = options.idempotencyKey;
    if (typeof options.correlationId === 'string') headers['bt-trace-id'] = options.correlationId;
    let body: string | undefined;
    if (plan.body !== undefined) {
      body = JSON.stringify(plan.body);
      headers['content-type'] = plan.contentType ?? 'application/json';
    }
    try {
      const response = await undiciRequest(`${this.apiUrl}${plan.path}`, {
        method: plan.method,
        headers,
        body,
        signal,
        dispatcher: this.agent,
      });
      const text = await response.body.text();
      let data: unknown = text === '' ? null : text;
      if (text !== '' && String(response.headers['content-type'] ?? '').includes('json')) {
        try {
          data = JSON.parse(text);
        } catch {
          // keep the text
        }
      }
      if (plan.camel) data = camelTokens(data);
      const ok = response.statusCode >= 200 && response.statusCode < 300;
      return {
        status: response.statusCode,
        data,
        message: ok ? undefined : `Request failed with status code ${response.statusCode}`,
      };
    } catch (error) {
      return { status: -1, data: null, message: (error as Error).message || 'the request to the vault failed' };
    }
  }

  async close(): Promise<void> {
    await this.agent.close();
  }
}

function planFor(op: string, params: Record<string, unknown>): Plan {
  const id = () => {
    if (typeof params.id !== 'string' || params.id === '')
      throw new Error(`${op}: the token id must be a non-empty string`);
    return encodeURIComponent(params.id);
  };
  switch (op) {
    case 'tokens.create':
      return { method: 'POST', path: '/tokens', body: snakeTokenBody(params.model), camel: true };
    case 'tokens.retrieve':
      return { method: 'GET', path: `/tokens/${id()}`, camel: true };
    case 'tokens.update':
      return {
        method: 'PATCH',
        path: `/tokens/${id()}`,
        body: snakeTokenBody(params.model),
        contentType: 'application/merge-patch+json',
        camel: true,
      };
    case 'tokens.delete':
      return { method: 'DELETE', path: `/tokens/${id()}`, camel: true };
    case 'tokens.list':
      return { method: 'GET', path: `/tokens${queryString(params.query)}`, camel: true };
    case 'tokenize':
      return { method: 'POST', path: '/tokenize', body: params.payload ?? null, camel: false };
    case 'detokenize':
      return { method: 'POST', path: '/detokenize', body: params.payload ?? null, camel: false };
    default:
      throw new Error(`bt: unknown operation ${JSON.stringify(op)}`);
  }
}

function isObject(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

export function snakeCase(key: string): string {
  return key
    .replace(/([a-z0-9])([A-Z])/g, '$1_$2')
    .replace(/([A-Z])([A-Z][a-z])/g, '$1_$2')
    .replace(/[-\s]+/g, '_')
    .toLowerCase();
}

export function camelCase(key: string): string {
  const joined = key.replace(/^[_\-\s]+|[_\-\s]+$/g, '').replace(/[_\-\s]+(.)/g, (_, c: string) => c.toUpperCase());
  if (joined === joined.toUpperCase()) return joined.toLowerCase();
  return joined.length > 0 ? joined[0].toLowerCase() + joined.slice(1) : joined;
}

function deepKeys(value: unknown, rename: (key: string) => string): unknown {
  if (Array.isArray(value)) return value.map((item) => deepKeys(item, rename));
  if (!isObject(value)) return value;
  const out: Record<string, unknown> = {};
  for (const [key, item] of Object.entries(value)) out[rename(key)] = deepKeys(item, rename);
  return out;
}

/** basis-theory-js transformTokenRequestSnakeCase: everything but `data` and `metadata`. */
function snakeTokenBody(model: unknown): unknown {
  if (!isObject(model)) return model ?? null;
  const out = deepKeys(model, snakeCase) as Record<string, unknown>;
  if (model.data !== undefined) out.data = model.data;
  if (model.metadata !== undefined) out.metadata = model.metadata;
  return out;
}

/** basis-theory-js transformTokenResponseCamelCase, lists included. */
export function camelTokens(body: unknown): unknown {
  if (!isObject(body)) return body;
  const one = (token: unknown) => {
    if (!isObject(token)) return token;
    const out = deepKeys(token, camelCase) as Record<string, unknown>;
    if (token.data !== undefined) out.data = token.data;
    if (token.metadata !== undefined) out.metadata = token.metadata;
    return out;
  };
  if (Array.isArray(body.data) && body.pagination !== undefined) {
    return { data: body.data.map(one), pagination: deepKeys(body.pagination, camelCase) };
  }
  return one(body);
}

/** basis-theory-js getQueryParams: snake_case names, arrays repeated, one level of objects as `name.key`. */
function queryString(query: unknown): string {
  if (!isObject(query)) return '';
  const params = new URLSearchParams();
  const append = (key: string, value: unknown) => {
    if (value === null || ['string', 'number', 'boolean'].includes(typeof value)) params.append(key, String(value));
  };
  for (const [key, value] of Object.entries(query)) {
    if (Array.isArray(value)) for (const item of value) append(snakeCase(key), item);
    else if (isObject(value)) for (const [inner, item] of Object.entries(value)) append(`${key}.${inner}`, item);
    else append(snakeCase(key), value);
  }
  const text = params.toString();
  return text === '' ? '' : `?${text}`;
}
