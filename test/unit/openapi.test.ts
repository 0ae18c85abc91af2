// The OpenAPI document (src/http/openapi): it covers every route the app serves and nothing else, its request bodies
// are the validators' own schemas, and docs/openapi.json is what the generator produces (`make openapi` rewrites it).
import { describe, expect, test } from '@jest/globals';
import { readFileSync } from 'node:fs';
import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import { createApp, type ApiContext } from '../../src/http/app.js';
import { routeTable } from '../../src/http/route-table.js';
import { loadConfig } from '../../src/config/config.js';
import { createLogger } from '../../src/observability/logger.js';
import { openApiDocument, openApiPath, openApiText } from '../../src/http/openapi/document.js';
import { OPERATIONS } from '../../src/http/openapi/operations.js';
import { validateCreateToken } from '../../src/domain/tokens/schema.js';

/** The app's routes. Building the app touches none of its services, so they can be empty here. */
function routes(): string[] {
  const context = {
    config: loadConfig({ env: { TOKENVAULT_STORE: 'memory' }, requireStore: false }),
    logger: createLogger('silent'),
    services: {},
    rateLimits: {},
  } as unknown as ApiContext;
  return routeTable(createApp(context)).map((row) => `${row.method} ${row.path}`);
}

type Json = Record<string, any>;
const addFormats = addFormatsModule as unknown as typeof addFormatsModule.default;

describe('OpenAPI document', () => {
  test('every route has an operation, and every operation is a route', () => {
    const served = routes();
    expect(served.length).toBeGreaterThan(50);
    expect(served.filter((row) => !(row in OPERATIONS))).toEqual([]);
    expect(Object.keys(OPERATIONS).filter((row) => !served.includes(row))).toEqual([]);
  });

  test('docs/openapi.json is what the generator produces (run `make openapi` after changing an interface)', () => {
    const committed = readFileSync(new URL('../../docs/openapi.json', import.meta.url), 'utf8');
    expect(committed === openApiText()).toBe(true);
  });

  test('request bodies are the schemas the routes validate with', () => {
    const doc: Json = openApiDocument();
    const body = doc.paths['/tokens'].post.requestBody.content['application/json'].schema;
    expect(Object.keys(body.properties)).toEqual(Object.keys((validateCreateToken.schema as Json).properties));
    expect(body.required).toEqual((validateCreateToken.schema as Json).required);
    // ajv's own display-name format is published as the pattern it checks.
    const name = doc.paths['/applications'].post.requestBody.content['application/json'].schema.properties.name;
    expect(new RegExp(name.pattern, 'u').test('ok name')).toBe(true);
    expect(new RegExp(name.pattern, 'u').test('bad\u202ename')).toBe(false);
  });

  test('every schema in the document is valid JSON Schema 2020-12 and every reference resolves', () => {
    const doc: Json = openApiDocument();
    expect(doc.openapi).toBe('3.1.0');
    const ajv = new Ajv2020({ strict: false, validateFormats: false });
    ajv.addSchema({ $id: 'doc', components: doc.components }, 'doc');
    const schemas: unknown[] = [];
    const refs: string[] = [];
    const walk = (value: unknown): void => {
      if (Array.isArray(value)) return value.forEach(walk);
      if (value === null || typeof value !== 'object') return;
      for (const [key, inner] of Object.entries(value)) {
        if (key === 'schema') schemas.push(inner);
        if (key === '$ref' && typeof inner === 'string') refs.push(inner);
        walk(inner);
      }
    };
    walk(doc.paths);
    walk(doc.components);
    for (const ref of refs) {
      const [, kind, name] = /^#\/components\/(schemas|responses)\/(\w+)$/.exec(ref) ?? [];
      expect(doc.components[kind]?.[name]).toBeDefined();
    }
    for (const schema of schemas) {
      const rewritten = JSON.parse(JSON.stringify(schema).replaceAll('"#/components', '"doc#/components'));
      expect(() => ajv.compile(rewritten)).not.toThrow();
    }
    expect(schemas.length).toBeGreaterThan(100);
  });

  test('every request example is valid against its own schema', () => {
    const doc: Json = openApiDocument();
    const ajv = new Ajv2020({ strict: false });
    addFormats(ajv);
    let examples = 0;
    for (const path of Object.values<Json>(doc.paths)) {
      for (const operation of Object.values<Json>(path)) {
        for (const media of Object.values<Json>(operation.requestBody?.content ?? {})) {
          if (media.example === undefined) continue;
          examples++;
          const validate = ajv.compile(media.schema);
          expect([validate(media.example), validate.errors]).toEqual([true, null]);
        }
      }
    }
    expect(examples).toBeGreaterThanOrEqual(5);
  });

  test('every link names an operation of the document and only parameters it has', () => {
    const doc: Json = openApiDocument();
    const operations = new Map<string, Json>();
    for (const path of Object.values<Json>(doc.paths))
      for (const op of Object.values<Json>(path)) operations.set(op.operationId, op);
    let links = 0;
    for (const op of operations.values()) {
      for (const answer of Object.values<Json>(op.responses)) {
        for (const link of Object.values<Json>(answer.links ?? {})) {
          links++;
          const target = operations.get(link.operationId);
          expect(target).toBeDefined();
          const names = (target!.parameters ?? []).map((p: Json) => p.name);
          for (const name of Object.keys(link.parameters)) expect(names).toContain(name);
        }
      }
    }
    expect(links).toBeGreaterThan(20);
    // The asynchronous invocation links to its result, and a new application key to its own operations.
    const async = doc.paths['/reactors/{id}/react-async'].post.responses['202'].links;
    expect(async.getReactorsIdResultsRequestId.parameters).toEqual({
      id: '$request.path.id',
      requestId: '$response.body#/asyncReactorRequestId',
    });
    const key = doc.paths['/applications/{id}/keys'].post.responses['201'].links;
    expect(Object.keys(key).sort()).toEqual(['deleteApplicationsIdKeysKeyId', 'getApplicationsIdKeysKeyId']);
  });

  test('paths are the routes in OpenAPI syntax', () => {
    expect(openApiPath('/tokens/:id')).toBe('/tokens/{id}');
    expect(openApiPath('/proxy{/*rest}')).toBe('/proxy');
    const doc: Json = openApiDocument();
    expect(doc.paths['/reactors/{id}/react'].post.parameters[0]).toMatchObject({ name: 'id', in: 'path' });
    expect(doc.paths['/openapi.json'].get.security).toEqual([]);
  });
});
