// Invocations read reactors and formulas from per-process caches kept by etcd watches. Two APIs on one etcd (each
// with its own worker): a change made through one is what the other runs within a second, and what the API that made
// it runs at once.
import { afterAll, beforeAll, expect, test } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import { createTenant, revealingApplication, startTestApi, type TestApi } from '../support/api.js';
import { call, client } from '../support/http.js';
import { eventually } from '../support/wait.js';

const answering = (word: string) =>
  `module.exports = async (req) => ({ raw: { word: '${word}', greeting: req.configuration.greeting ?? null } });`;

let one: TestApi;
let two: TestApi;
let managementKey: string;
let tenantId: string;
let userKey: string;

beforeAll(async () => {
  [one, two] = await Promise.all([startTestApi(), startTestApi()]);
  ({ managementKey, tenantId } = await createTenant(one.url, one.operatorKey));
  userKey = (await revealingApplication(one.url, managementKey, ['token:use'])).key;
}, 30_000);

afterAll(async () => {
  await Promise.all([one?.close(), two?.close()]);
});

async function formulaWith(code: string, configuration: unknown[] = []) {
  const answer = await client(one.url, managementKey).post('/reactor-formulas', {
    body: { name: 'f', type: 'private', code, configuration, request_parameters: [] },
  });
  expect(answer.status).toBe(201);
  return answer.body.id as string;
}

async function reactorOf(formulaId: string, configuration: Record<string, unknown> = {}) {
  const answer = await client(one.url, managementKey).post('/reactors', {
    body: { name: 'r', formula: { id: formulaId }, configuration },
  });
  expect(answer.status).toBe(201);
  return answer.body.id as string;
}

const react = (url: string, reactorId: string) =>
  client(url, userKey).post(`/reactors/${reactorId}/react`, { body: { args: {} } });

async function expectWord(url: string, reactorId: string, word: string) {
  const answer = await react(url, reactorId);
  expect(answer.status).toBe(200);
  expect(answer.body.raw.word).toBe(word);
}

test('a formula changed through one API is what the other runs within a second', async () => {
  const formulaId = await formulaWith(answering('before'));
  const reactorId = await reactorOf(formulaId);
  for (let i = 0; i < 3; i++) await expectWord(two.url, reactorId, 'before'); // cached on the other API now
  const updated = await client(one.url, managementKey).put(`/reactor-formulas/${formulaId}`, {
    body: { name: 'f', type: 'private', code: answering('after'), configuration: [], request_parameters: [] },
  });
  expect(updated.status).toBe(200);
  await expectWord(one.url, reactorId, 'after'); // at once where it was changed
  await eventually(() => expectWord(two.url, reactorId, 'after'), 1000);
});

test("a reactor's configuration patched through one API is used by the other within a second", async () => {
  const reactorId = await reactorOf(
    await formulaWith(answering('configured'), [{ name: 'greeting', type: 'string' }]),
    { greeting: 'hello' },
  );
  for (let i = 0; i < 3; i++) expect((await react(two.url, reactorId)).body.raw.greeting).toBe('hello');
  const patched = await client(one.url, managementKey).patch(`/reactors/${reactorId}`, {
    body: { configuration: { greeting: 'bonjour' } },
    headers: { 'Content-Type': 'application/merge-patch+json' },
  });
  expect(patched.status).toBe(200);
  expect((await react(one.url, reactorId)).body.raw.greeting).toBe('bonjour');
  await eventually(async () => expect((await react(two.url, reactorId)).body.raw.greeting).toBe('bonjour'), 1000);
});

test('a reactor deleted through one API is 404 on the other within a second', async () => {
  const reactorId = await reactorOf(await formulaWith(answering('doomed')));
  for (let i = 0; i < 3; i++) await expectWord(two.url, reactorId, 'doomed');
  expect((await client(one.url, managementKey).delete(`/reactors/${reactorId}`)).status).toBe(204);
  expect((await react(one.url, reactorId)).status).toBe(404);
  await eventually(async () => expect((await react(two.url, reactorId)).status).toBe(404), 1000);
});

test('a reactor created after a call for its id answered 404 is found at once', async () => {
  const id = randomUUID();
  expect((await react(one.url, id)).status).toBe(404);
  expect((await react(one.url, id)).status).toBe(404); // the absence is cached, and must not outlive the creation
  const formulaId = await formulaWith(answering('born'));
  // Ids are chosen by the operator (the Kubernetes controller, acting in the tenant).
  const created = await call(one.url, 'POST', '/reactors', {
    key: one.operatorKey,
    headers: { 'BT-TENANT-ID': tenantId },
    body: { id, name: 'r', formula: { id: formulaId } },
  });
  expect(created.status).toBe(201);
  await expectWord(one.url, id, 'born');
});

test('a reactor re-created with the same id and another formula runs the new formula on both APIs', async () => {
  // Each API remembers a reactor's formula id (from creating it, from its watch, from a call) to read the formula in
  // the same round trip as the reactor: a hint, which the record read must override.
  const id = randomUUID();
  const create = (api: TestApi, formulaId: string) =>
    call(api.url, 'POST', '/reactors', {
      key: api.operatorKey,
      headers: { 'BT-TENANT-ID': tenantId },
      body: { id, name: 'r', formula: { id: formulaId } },
    });
  const first = await formulaWith(answering('first formula'));
  expect((await create(one, first)).status).toBe(201);
  await expectWord(one.url, id, 'first formula');
  await eventually(() => expectWord(two.url, id, 'first formula'), 1000);
  expect((await client(two.url, managementKey).delete(`/reactors/${id}`)).status).toBe(204);
  const second = await formulaWith(answering('second formula'));
  expect((await create(two, second)).status).toBe(201);
  await expectWord(two.url, id, 'second formula');
  await eventually(() => expectWord(one.url, id, 'second formula'), 1000);
});

test('an official formula changed by the operator is what reactors on the other API run within a second', async () => {
  const body = (word: string) => ({
    name: 'Official word',
    type: 'official',
    code: answering(word),
    configuration: [],
    request_parameters: [],
  });
  const official = await call(one.url, 'POST', '/admin/reactor-formulas', {
    key: one.operatorKey,
    body: body('official-before'),
  });
  expect(official.status).toBe(201);
  const reactorId = await reactorOf(official.body.id);
  for (let i = 0; i < 3; i++) await expectWord(two.url, reactorId, 'official-before');
  const updated = await call(one.url, 'PUT', `/admin/reactor-formulas/${official.body.id}`, {
    key: one.operatorKey,
    body: body('official-after'),
  });
  expect(updated.status).toBe(200);
  await eventually(() => expectWord(two.url, reactorId, 'official-after'), 1000);
  expect((await client(one.url, managementKey).delete(`/reactors/${reactorId}`)).status).toBe(204);
  expect(
    (await call(one.url, 'DELETE', `/admin/reactor-formulas/${official.body.id}`, { key: one.operatorKey })).status,
  ).toBe(204);
});
