// Acceptance: asynchronous reactors (`reactors.reactAsync`, `reactors.results.get`) and token intents
// (`tokenIntents.create/get/delete`, `tokens.create({ tokenIntentId })`) through @basis-theory/node-sdk 5.x, pointed
// at `tokenvault dev` by its base URL only. The CLI runs from dist/ (`npx tsc -p tsconfig.build.json` first when
// iterating); see test/support/dev-server.ts.
import { BasisTheoryClient } from '@basis-theory/node-sdk';
import { rejection, startDevServer, type DevServer } from '../support/dev-server.js';

let dev: DevServer;
const nodeSdk = (apiKey: string) => new BasisTheoryClient({ apiKey, baseUrl: dev.baseUrl, maxRetries: 0 });
type NodeSdkError = { statusCode: number; body: any };

const CARD = { number: '4242424242424242', expiration_month: 12, expiration_year: 2031, cvc: '123' };

let admin: BasisTheoryClient;
let server: BasisTheoryClient;
let browser: BasisTheoryClient;

beforeAll(async () => {
  dev = await startDevServer();
  admin = nodeSdk(dev.rootKey);
  const permissions = ['token:create', 'token:read', 'token:use', 'token-intent:read', 'token-intent:delete'];
  const backend = await admin.applications.create({
    name: 'async server',
    type: 'private',
    rules: [{ description: 'all', priority: 1, container: '/', transform: 'reveal', permissions }],
  });
  server = nodeSdk(backend.key!);
  const web = await admin.applications.create({ name: 'web', type: 'public', permissions: ['token-intent:create'] });
  browser = nodeSdk(web.key!);
}, 60_000);

afterAll(async () => {
  await dev?.stop();
});

/** Bounded polling of results.get (50 polls, 100 ms apart). */
async function settled(reactorId: string, requestId: string) {
  for (let i = 0; i < 50; i++) {
    const result = (await server.reactors.results.get(reactorId, requestId)) as { status: string };
    if (result.status !== 'pending') return result as any;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error('still pending after 50 polls');
}

describe('asynchronous reactors through node-sdk', () => {
  test('reactAsync returns a request id; results.get returns what react returns', async () => {
    const reactor = await admin.reactors.create({
      name: 'async echo',
      code: 'module.exports = async (req) => ({ raw: { card: req.args.card, n: req.args.n } });',
    });
    const token = await server.tokens.create({ type: 'card', data: CARD });
    const args = { card: `{{ ${token.id} }}`, n: 3 };
    const accepted = await server.reactors.reactAsync(reactor.id!, { args });
    expect(accepted.asyncReactorRequestId).toMatch(/^[0-9a-f-]{36}$/);
    const result = await settled(reactor.id!, accepted.asyncReactorRequestId!);
    const sync = await server.reactors.react(reactor.id!, { args });
    expect(result).toMatchObject({ status: 'completed', reactor_id: reactor.id, result: { raw: sync.raw } });
    expect(result.result.raw.card).toEqual(CARD);
  });

  test("another reactor's id or an unknown request id is a NotFoundError", async () => {
    const code = 'module.exports = async () => ({ raw: {} });';
    const one = await admin.reactors.create({ name: 'one', code });
    const two = await admin.reactors.create({ name: 'two', code });
    const { asyncReactorRequestId } = await server.reactors.reactAsync(one.id!, { args: {} });
    await settled(one.id!, asyncReactorRequestId!);
    expect(
      (await rejection<NodeSdkError>(server.reactors.results.get(two.id!, asyncReactorRequestId!))).statusCode,
    ).toBe(404);
    expect(
      (await rejection<NodeSdkError>(server.reactors.results.get(one.id!, '00000000-0000-4000-8000-000000000000')))
        .statusCode,
    ).toBe(404);
  });
});

describe('token intents through node-sdk', () => {
  test('a public key creates an intent; the server reads it, converts it once, and it is gone', async () => {
    const intent = await browser.tokenIntents.create({ type: 'card', data: CARD });
    expect(intent).toMatchObject({
      type: 'card',
      card: { bin: '42424242', last4: '4242', expirationMonth: 12, expirationYear: 2031 },
    });
    expect(intent.expiresAt!.getTime() - intent.createdAt!.getTime()).toBe(24 * 3600 * 1000);
    const read = await server.tokenIntents.get(intent.id!);
    expect(read.fingerprint).toBe(intent.fingerprint);

    const token = await server.tokens.create({ tokenIntentId: intent.id!, metadata: { source: 'intent' } });
    expect(token).toMatchObject({ type: 'card', fingerprint: intent.fingerprint, metadata: { source: 'intent' } });
    expect((await server.tokens.get(token.id!)).data).toEqual(CARD);
    expect((await rejection<NodeSdkError>(server.tokenIntents.get(intent.id!))).statusCode).toBe(404);
    expect((await rejection<NodeSdkError>(server.tokens.create({ tokenIntentId: intent.id! }))).statusCode).toBe(404);
  });

  test('delete; and the public key may neither read nor delete', async () => {
    const intent = await browser.tokenIntents.create({ type: 'card', data: CARD });
    expect((await rejection<NodeSdkError>(browser.tokenIntents.get(intent.id!))).statusCode).toBe(403);
    expect((await rejection<NodeSdkError>(browser.tokenIntents.delete(intent.id!))).statusCode).toBe(403);
    await server.tokenIntents.delete(intent.id!);
    expect((await rejection<NodeSdkError>(server.tokenIntents.get(intent.id!))).statusCode).toBe(404);
  });

  test('invalid card data is a BadRequestError naming the field', async () => {
    const error = await rejection<NodeSdkError>(
      browser.tokenIntents.create({ type: 'card', data: { ...CARD, number: '1234' } }),
    );
    expect(error.statusCode).toBe(400);
    expect(Object.keys(error.body.errors)).toContain('data.number');
  });
});
