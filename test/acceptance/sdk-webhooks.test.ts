// Acceptance: @basis-theory/node-sdk `webhooks.*` (create, get, list, update, delete, events.list, ping) against
// `tokenvault dev` (a real child process from dist/), and a token created through the SDK delivered, signed, to a
// real HTTPS receiver on loopback whose CA the dev server trusts and whose host name (localhost) it allow-lists.
import { BasisTheoryClient } from '@basis-theory/node-sdk';
import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import { verify } from '../../src/webhooks/signature.js';
import { startDevServer, type DevServer } from '../support/dev-server.js';
import { startHttpsServer, testCertificates, type HttpsTestServer } from '../support/https.js';
import { eventually } from '../support/wait.js';

let dev: DevServer;
let receiver: HttpsTestServer;
const received: Array<{ headers: IncomingHttpHeaders; raw: string }> = [];

const nodeSdk = (apiKey: string) => new BasisTheoryClient({ apiKey, baseUrl: dev.baseUrl, maxRetries: 0 });
type NodeSdkError = { statusCode: number; body: any };

function handler(req: IncomingMessage, res: ServerResponse): void {
  let raw = '';
  req.setEncoding('utf8');
  req.on('data', (chunk: string) => (raw += chunk));
  req.on('end', () => {
    received.push({ headers: req.headers, raw });
    res.writeHead(200).end();
  });
}

beforeAll(async () => {
  const { caFile } = await testCertificates();
  receiver = await startHttpsServer(handler);
  dev = await startDevServer({ TOKENVAULT_PROXY_ALLOWED_HOSTS: 'localhost', TOKENVAULT_PROXY_CA_FILE: caFile });
}, 60_000);

afterAll(async () => {
  await dev?.stop();
  await receiver?.close();
});

describe('@basis-theory/node-sdk webhooks', () => {
  test('ping, event types, and the webhook lifecycle', async () => {
    const client = nodeSdk(dev.rootKey);
    await client.webhooks.ping();
    const types = await client.webhooks.events.list();
    expect(types).toEqual(expect.arrayContaining(['token.created', 'reactor.updated']));

    const created = await client.webhooks.create({
      name: 'webhook-create',
      url: `${receiver.url}/hooks`,
      notifyEmail: 'ops@example.com',
      events: ['token:created'],
    });
    expect(created).toMatchObject({
      name: 'webhook-create',
      status: 'enabled',
      notifyEmail: 'ops@example.com',
      events: ['token.created'],
    });
    expect(created.createdAt).toBeInstanceOf(Date);
    const secret = (created as unknown as { signing_secret: string }).signing_secret;
    expect(secret).toMatch(/^whsec_/);

    expect((await client.webhooks.get(created.id)).name).toBe('webhook-create');
    expect((await client.webhooks.list()).data.map((w) => w.id)).toEqual([created.id]);
    const updated = await client.webhooks.update(created.id, {
      name: 'webhook-update',
      url: `${receiver.url}/hooks`,
      events: ['token.created', 'token.deleted'],
    });
    expect(updated).toMatchObject({ name: 'webhook-update', events: ['token.created', 'token.deleted'] });
    expect(updated.modifiedAt).toBeInstanceOf(Date);

    const app = await client.applications.create({ name: 'server', type: 'private', permissions: ['token:create'] });
    const token = await nodeSdk(app.key!).tokens.create({ type: 'token', data: 'sdk-plaintext' });
    await eventually(async () => expect(received).toHaveLength(1), 10_000);
    const [delivery] = received;
    expect(delivery.raw).not.toContain('sdk-plaintext');
    expect(JSON.parse(delivery.raw).event).toMatchObject({ type: 'token.created', data: { token: { id: token.id } } });
    const timestamp = Number(delivery.headers['bt-timestamp']);
    expect(verify(secret, timestamp, delivery.raw, String(delivery.headers['bt-signature']))).toBe(true);

    await client.webhooks.delete(created.id);
    const missing = await client.webhooks.get(created.id).then(
      () => undefined,
      (error: unknown) => error as NodeSdkError,
    );
    expect(missing?.statusCode).toBe(404);
  }, 30_000);

  test('a refused destination is a 400 the SDK surfaces', async () => {
    const client = nodeSdk(dev.rootKey);
    const refused = await client.webhooks
      .create({ name: 'plain http', url: `http://localhost:${receiver.port}/hooks`, events: ['token.created'] })
      .then(
        () => undefined,
        (error: unknown) => error as NodeSdkError,
      );
    expect(refused?.statusCode).toBe(400);
    expect(refused?.body.code).toBe('TV_DESTINATION_REFUSED');
  });
});
