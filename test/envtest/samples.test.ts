// config/samples, applied as a user would (kubectl apply of the kustomize build) to the test control plane with the
// operator running (test/support/operator.ts: the real controller, API and worker): every object becomes Ready, the
// controller writes the keys into the Secrets the samples name, and the walkthrough of docs/kubernetes.md works: the
// application key from its Secret creates a card token and calls the reactor, which reads its configuration from
// the sample Secret.

import { createHmac } from 'node:crypto';
import path from 'node:path';
import { afterAll, beforeAll, expect, test } from '@jest/globals';
import { toolBinary } from '../support/control-plane.js';
import { call } from '../support/http.js';
import { parseManifests, repoRoot, run } from '../support/manifests.js';
import { startOperatorEnv, type OperatorEnv } from '../support/operator.js';

let env: OperatorEnv;
let namespace: string;
let samples: string;

beforeAll(async () => {
  const kubectl = await toolBinary('kubectl');
  [env, { stdout: samples }] = await Promise.all([
    startOperatorEnv(),
    run(kubectl, ['kustomize', path.join(repoRoot, 'config/samples')]),
  ]);
  namespace = await env.namespace('samples');
  await env.kubectl(['apply', '-n', namespace, '-f', '-'], samples);
}, 60_000);

afterAll(async () => {
  await env?.stop();
}, 30_000);

test('every sample object becomes Ready, and the keys land in the Secrets the samples name', async () => {
  const objects = parseManifests(samples).filter((o) => o.apiVersion.startsWith('tokenvault.dev/'));
  expect(objects.map((o) => o.kind).sort()).toEqual(['Application', 'Proxy', 'Reactor', 'ReactorFormula', 'Tenant']);
  const ready = await Promise.all(objects.map((o) => env.waitReady(o.kind, namespace, o.metadata.name, 45_000)));
  for (const object of ready) expect(object.status.id).toEqual(expect.any(String));

  for (const [secret, key] of [
    ['acme-management', 'key'],
    ['backend-key', 'key'],
    ['echo-proxy-key', 'key'],
  ]) {
    expect({ secret, value: await env.readSecret(namespace, secret, key) }).toEqual({
      secret,
      value: expect.stringMatching(/^key_/),
    });
  }
}, 60_000);

test('the walkthrough: the application key from its Secret tokenizes a card and calls the sample reactor', async () => {
  const reactor = await env.waitReady('Reactor', namespace, 'card-summary');
  const key = (await env.readSecret(namespace, 'backend-key'))!;

  const token = await call(env.api.url, 'POST', '/tokens', {
    key,
    body: { type: 'card', data: { number: '4242424242424242', expiration_month: 12, expiration_year: 2030 } },
  });
  expect(token.status).toBe(201);

  const answer = await call(env.api.url, 'POST', `/reactors/${reactor.status.id}/react`, {
    key,
    body: { args: { card: `{{ ${token.body.id} }}` } },
  });
  expect(answer.status).toBe(200);
  const hmacKey = parseManifests(samples).find((o) => o.metadata.name === 'card-summary-config')!.stringData[
    'hmac-key'
  ];
  expect(answer.body.raw).toEqual({
    last4: '4242',
    reference: createHmac('sha256', hmacKey).update('4242424242424242').digest('hex'),
  });
}, 30_000);
