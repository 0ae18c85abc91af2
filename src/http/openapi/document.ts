// The OpenAPI 3.1 document of the REST interface, built from the operations registry (./operations.ts), the response
// schemas (./schemas.ts) and the request validators' own schemas. Served at GET /openapi.json and written to
// docs/openapi.json (`make openapi`; test/unit/openapi.test.ts fails when the file is stale).
import { DISPLAY_NAME, DISPLAY_TEXT, WELL_FORMED } from '../../validation/compile.js';
import { OPERATIONS, type Operation } from './operations.js';
import { COMPONENTS } from './schemas.js';

/** The contract's own version: raised when the interface changes in a way a client can see. */
export const API_VERSION = '1.0.0';

type Json = Record<string, unknown>;

const COMPONENT_NAMES = new Map<unknown, string>(Object.entries(COMPONENTS).map(([name, schema]) => [schema, name]));

/**
 * `schema` as the document publishes it: ajv's own formats become the patterns they stand for; named response
 * schemas become references; `additionalProperties: false` is dropped, because the validator removes unknown fields
 * (ajv's removeAdditional) rather than refusing them, and the document says what the server does.
 */
function publish(schema: unknown, top = false): unknown {
  if (Array.isArray(schema)) return schema.map((item) => publish(item));
  if (schema === null || typeof schema !== 'object') return schema;
  const name = COMPONENT_NAMES.get(schema);
  if (name !== undefined && !top) return { $ref: `#/components/schemas/${name}` };
  const out: Json = {};
  for (const [key, value] of Object.entries(schema as Json)) {
    if (key === 'additionalProperties' && value === false) continue;
    if (key === 'format' && value === 'display-name') out.pattern = DISPLAY_NAME.source;
    else if (key === 'format' && value === 'display-text') out.pattern = DISPLAY_TEXT.source;
    else if (key === 'format' && value === 'well-formed') out.pattern = WELL_FORMED.source;
    else if (key === 'properties' || key === 'patternProperties')
      out[key] = Object.fromEntries(Object.entries(value as Json).map(([k, v]) => [k, publish(v)]));
    else out[key] = publish(value);
  }
  return out;
}

/** `/tokens/:id` → `/tokens/{id}`; `/proxy{/*rest}` (the path and below it) → `/proxy`. */
export function openApiPath(route: string): string {
  return route.replace(/\{\/\*\w+\}$/, '').replace(/:(\w+)/g, '{$1}');
}

function operationId(method: string, route: string): string {
  const words = openApiPath(route)
    .replace(/[{}]/g, '')
    .split(/[^A-Za-z0-9]+/)
    .filter(Boolean);
  return [method.toLowerCase(), ...words.map((w) => w[0].toUpperCase() + w.slice(1))].join('');
}

const problem = (description: string) => ({
  description,
  content: { 'application/problem+json': { schema: { $ref: '#/components/schemas/ProblemDocument' } } },
});

/** The refusals every operation may answer, once under components/responses. */
const PROBLEMS = {
  BadRequest: problem('The request is malformed; `errors` names each bad field.'),
  Unauthorized: problem('No key, or an unknown, expired or revoked one.'),
  Forbidden: problem('The key may not do this (a missing permission, or the wrong kind of key).'),
  NotFound: problem('No such resource in the caller\u2019s tenant.'),
  Conflict: problem(
    'A limit, a record a Kubernetes object declares, a concurrent change, or a BT-IDEMPOTENCY-KEY used with another request.',
  ),
  TooManyRequests: problem('A rate limit; Retry-After says when to retry.'),
  ClientError: problem('Any other refusal (docs/api.md, error table).'),
  ServerError: problem('The server or a service it needs failed.'),
};

/**
 * A /proxy refusal after authentication: `{"proxy_error": <problem>}` as application/json (src/http/routes/proxy.ts);
 * a refusal before the proxy route (a malformed request, a draining server) is a problem document.
 */
const proxyError = (description: string) => ({
  description,
  content: {
    'application/json': {
      schema: {
        type: 'object',
        required: ['proxy_error'],
        properties: { proxy_error: { $ref: '#/components/schemas/ProblemDocument' } },
      },
    },
    'application/problem+json': { schema: { $ref: '#/components/schemas/ProblemDocument' } },
  },
});

const ref = (name: keyof typeof PROBLEMS) => ({ $ref: `#/components/responses/${name}` });

function responses(op: Operation, links: Json | undefined): Json {
  const out: Json = {};
  if (op.status === 204) out['204'] = { description: 'Done; no body.' };
  else if (op.status >= 400) out[String(op.status)] = problem(op.summary);
  else {
    out[String(op.status)] = {
      description: op.summary,
      ...(op.answer ? { content: { 'application/json': { schema: publish(op.answer) } } } : {}),
      ...(links ? { links } : {}),
    };
  }
  if (op.body || op.query || op.headers || op.idempotent) out['400'] = ref('BadRequest');
  if (op.auth !== 'none') {
    out['401'] = ref('Unauthorized');
    out['403'] = ref('Forbidden');
  }
  if (op.id || op.params) out['404'] = ref('NotFound');
  if (op.conflict || op.idempotent) out['409'] = ref('Conflict');
  if (op.auth !== 'none') out['429'] = ref('TooManyRequests');
  out['4XX'] = ref('ClientError');
  out['5XX'] = ref('ServerError');
  if (op.proxyErrors) {
    out['400'] = proxyError('A bad proxy request (headers, path, body); `proxy_error.errors` names each bad field.');
    out['404'] = proxyError('No proxy has the proxy key.');
    out['4XX'] = proxyError('Any other refusal of the proxy (docs/api.md, "Proxy").');
    out['5XX'] = proxyError('The proxy, a transform or the destination failed.');
  }
  if (op.otherAnswers) out.default = { description: 'An answer of the destination or of the code, as it is.' };
  return out;
}

function parameters(op: Operation, route: string): Json[] {
  const out: Json[] = [];
  for (const [, name] of route.matchAll(/:(\w+)/g)) {
    const schema = op.params?.[name] ?? (name === 'id' ? op.id : undefined) ?? { type: 'string' };
    out.push({ name, in: 'path', required: true, schema: publish(schema) });
  }
  for (const q of op.query ?? []) {
    out.push({
      name: q.name,
      in: 'query',
      required: false,
      ...(q.mediaType ? { content: { [q.mediaType]: { schema: publish(q.schema) } } } : { schema: publish(q.schema) }),
      ...(q.schema.type === 'array' ? { style: 'form', explode: true } : {}),
      ...(q.description ? { description: q.description } : {}),
    });
  }
  for (const h of op.headers ?? []) {
    out.push({ name: h.name, in: 'header', required: false, schema: publish(h.schema), description: h.description });
  }
  if (op.idempotent) {
    out.push({
      name: 'BT-IDEMPOTENCY-KEY',
      in: 'header',
      required: false,
      description:
        'A retry with the same key and body gets the first answer again, for 24 hours. Given once: twice is a 400. A new key when the tenant has TOKENVAULT_IDEMPOTENCY_KEYS_PER_TENANT answers kept is a 409 TV_IDEMPOTENCY_KEY_LIMIT before the request runs; an answer over TOKENVAULT_IDEMPOTENCY_ANSWER_MAX_BYTES is not kept, and its retry is a 409 TV_IDEMPOTENCY_ANSWER_NOT_KEPT (the request is not run again).',
      schema: { type: 'string', minLength: 1, maxLength: 255 },
    });
  }
  return out;
}

function security(op: Operation, route: string): Json[] {
  if (op.auth === 'none') return [];
  if (op.auth === 'operator') return [{ OperatorKey: [] }];
  // A pre-configured proxy with require_auth false is called with BT-PROXY-KEY alone.
  if (route.startsWith('/proxy{')) return [{ ApiKey: [] }, {}];
  return [{ ApiKey: [] }];
}

/**
 * Links from a create (POST on a collection) to the operations on the created resource, for stateful tests: the new
 * resource's path parameter is the answer's `id`, the collection's own parameters are the request's.
 */
function linksOf(method: string, route: string, op: Operation): Json | undefined {
  const links: Json = {};
  for (const [key, parameters] of Object.entries(op.links ?? {})) {
    const [otherMethod, otherRoute] = key.split(' ');
    links[operationId(otherMethod, otherRoute)] = { operationId: operationId(otherMethod, otherRoute), parameters };
  }
  if (method !== 'POST') return Object.keys(links).length > 0 ? links : undefined;
  for (const key of Object.keys(OPERATIONS)) {
    const [otherMethod, otherRoute] = key.split(' ');
    const created = otherRoute.startsWith(`${route}/:`) ? otherRoute.slice(route.length + 2) : undefined;
    if (created === undefined || !/^\w+$/.test(created)) continue;
    const parameters: Json = {};
    for (const [, name] of route.matchAll(/:(\w+)/g)) parameters[name] = `$request.path.${name}`;
    parameters[created] = '$response.body#/id';
    links[operationId(otherMethod, otherRoute)] = { operationId: operationId(otherMethod, otherRoute), parameters };
  }
  return Object.keys(links).length > 0 ? links : undefined;
}

function operation(method: string, route: string, op: Operation): Json {
  const params = parameters(op, route);
  const description = [
    op.description,
    op.permission ? `Needs the permission \`${op.permission}\`.` : undefined,
    op.auth === 'operator' ? 'Needs the operator key.' : undefined,
  ]
    .filter(Boolean)
    .join(' ');
  return {
    operationId: operationId(method, route),
    summary: op.summary,
    ...(description ? { description } : {}),
    tags: [op.tag],
    ...(op.permission ? { 'x-permission': op.permission } : {}),
    security: security(op, route),
    ...(params.length > 0 ? { parameters: params } : {}),
    ...(op.body
      ? {
          requestBody: {
            required: op.body.required ?? true,
            content: {
              [op.body.contentType ?? 'application/json']: {
                schema: publish(op.body.schema),
                ...(op.body.example === undefined ? {} : { example: op.body.example }),
              },
            },
          },
        }
      : {}),
    responses: responses(op, linksOf(method, route, op)),
  };
}

function build(): Json {
  const paths: Record<string, Json> = {};
  for (const [key, op] of Object.entries(OPERATIONS)) {
    const [method, route] = key.split(' ');
    (paths[openApiPath(route)] ??= {})[method.toLowerCase()] = operation(method, route, op);
  }
  const sorted = Object.fromEntries(Object.entries(paths).sort(([a], [b]) => a.localeCompare(b)));
  return {
    openapi: '3.1.0',
    info: {
      title: 'tokenvault',
      version: API_VERSION,
      description:
        'The REST interface of tokenvault, a self-hosted token vault speaking the Basis Theory API. Generated from the schemas the routes validate with (src/http/openapi); docs/api.md describes the decisions behind it.',
      license: { name: 'Apache-2.0', identifier: 'Apache-2.0' },
    },
    tags: [...new Set(Object.values(OPERATIONS).map((op) => op.tag))].map((name) => ({ name })),
    paths: sorted,
    components: {
      securitySchemes: {
        ApiKey: {
          type: 'apiKey',
          in: 'header',
          name: 'BT-API-KEY',
          description: 'An application key or a session key.',
        },
        OperatorKey: {
          type: 'apiKey',
          in: 'header',
          name: 'BT-API-KEY',
          description: 'The operator key (TOKENVAULT_OPERATOR_KEY_HASH); the controller and `tokenvault dev` hold it.',
        },
      },
      responses: PROBLEMS,
      schemas: Object.fromEntries(Object.entries(COMPONENTS).map(([name, schema]) => [name, publish(schema, true)])),
    },
  };
}

let cached: Json | undefined;

/** The document; built once, it never changes while the process runs. */
export function openApiDocument(): Json {
  return (cached ??= build());
}

/** The document as docs/openapi.json holds it. */
export function openApiText(): string {
  return `${JSON.stringify(openApiDocument(), null, 2)}\n`;
}
