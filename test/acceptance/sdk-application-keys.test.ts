// Acceptance: application keys through the official @basis-theory/node-sdk (client.applicationKeys), pointed at
// `tokenvault dev` by its base URL only: a second key beside the first, both in use, the first deleted and refused.
// The CLI runs from dist/ (`npx tsc -p tsconfig.build.json` first when iterating); see test/support/dev-server.ts.
import { BasisTheoryClient } from '@basis-theory/node-sdk';
import { rejection, startDevServer, type DevServer } from '../support/dev-server.js';

let dev: DevServer;
const nodeSdk = (apiKey: string) => new BasisTheoryClient({ apiKey, baseUrl: dev.baseUrl, maxRetries: 0 });

beforeAll(async () => {
  dev = await startDevServer();
});

afterAll(async () => {
  await dev?.stop();
});

test('node-sdk applicationKeys: create a second key, use both, delete the first, the first is refused with 401', async () => {
  const root = nodeSdk(dev.rootKey);
  const app = await root.applications.create({
    name: 'rotating server',
    type: 'private',
    permissions: ['token:create', 'token:read'],
  });
  const firstKey = app.key!;
  const [first] = await root.applicationKeys.list(app.id!);
  expect(first.id).toBe(app.keys![0].id);
  expect(first.key).toBeUndefined();

  const second = await root.applicationKeys.create(app.id!);
  expect(second.id).toMatch(/^[0-9a-f-]{36}$/);
  expect(second.key).toMatch(/^key_/);
  expect(second.createdAt).toBeInstanceOf(Date);

  // Both keys act as the application.
  for (const key of [firstKey, second.key!]) {
    const client = nodeSdk(key);
    expect((await client.applications.getByKey()).id).toBe(app.id);
    const token = await client.tokens.create({ type: 'token', data: `with ${key.slice(0, 8)}` });
    expect(token.id).toBeTruthy();
  }

  const listed = await root.applicationKeys.list(app.id!);
  expect(listed.map((k) => k.id)).toEqual([first.id, second.id]);
  expect(listed.every((k) => k.key === undefined)).toBe(true);
  const fetched = await root.applicationKeys.get(app.id!, second.id!);
  expect(fetched).toMatchObject({ id: second.id, createdBy: second.createdBy });
  expect(fetched.key).toBeUndefined();

  await root.applicationKeys.delete(app.id!, first.id!);
  // Revoked through the key cache's watch: the refusal follows within milliseconds (bounded here at 2 s).
  const deleted = Date.now();
  let refused = await rejection<{ statusCode: number }>(nodeSdk(firstKey).applications.getByKey()).catch(
    () => undefined,
  );
  while (refused?.statusCode !== 401 && Date.now() - deleted < 2000) {
    await new Promise((resolve) => setTimeout(resolve, 20));
    refused = await rejection<{ statusCode: number }>(nodeSdk(firstKey).applications.getByKey()).catch(() => undefined);
  }
  expect(refused).toMatchObject({ statusCode: 401 });
  expect((await nodeSdk(second.key!).applications.getByKey()).id).toBe(app.id);
  expect((await root.applicationKeys.list(app.id!)).map((k) => k.id)).toEqual([second.id]);

  const gone = await rejection(root.applicationKeys.get(app.id!, first.id!));
  expect(gone).toMatchObject({ statusCode: 404 });
});
