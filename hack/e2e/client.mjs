// The scenario's client of `make e2e`: the official SDKs, run from this machine against the API Service's ClusterIP
// (kube-proxy makes ClusterIPs reachable from the node). Plain ESM so that it runs with the machine's Node and the
// repository's node_modules, without a build.
//
//   node hack/e2e/client.mjs smoke  BASE_URL KEY REACTOR_ID           card token (node-sdk), read back
//                                                                      (basis-theory-js), the reactor answers (node-sdk)
//   node hack/e2e/client.mjs load   BASE_URL KEY REACTOR_ID SECONDS OUT  sequential token writes and reactor calls
//                                                                      until SECONDS pass or SIGTERM; summary to OUT
//   node hack/e2e/client.mjs verify BASE_URL KEY OUT                   every acknowledged token of OUT reads back
//   node hack/e2e/client.mjs react  BASE_URL KEY REACTOR_ID           one reactor call on a new card token: prints raw
//   node hack/e2e/client.mjs proxy  BASE_URL KEY PROXY_KEY            a card token (node-sdk), then the pre-configured
//                                                                      proxy (basis-theory-js) with its number as a
//                                                                      token expression: the echo must have received
//                                                                      the detokenized number and the credential header
//
// It runs from the host (the scenario) and from a pod in the cluster (step "SDKs from a pod"), where BASE_URL is the
// API Service's DNS name; KEY may be "-" to read it from the environment variable TOKENVAULT_E2E_KEY (a Secret).
//
// Every result is one JSON line on stdout; a failed expectation exits 1 with the reason on stderr.
import { readFileSync, writeFileSync } from 'node:fs';
import { createServer, connect } from 'node:net';
import { BasisTheory } from '@basis-theory/basis-theory-js';
import { BasisTheoryClient } from '@basis-theory/node-sdk';

const CARD = { number: '4242424242424242', expiration_month: 12, expiration_year: 2030, cvc: '123' };
const [command, baseUrl, keyArgument, ...rest] = process.argv.slice(2);
const key = keyArgument === '-' ? process.env.TOKENVAULT_E2E_KEY : keyArgument;

function fail(message) {
  process.stderr.write(`client.mjs ${command}: ${message}\n`);
  process.exit(1);
}

// maxRetries 0: the scenario counts every failure the service returns instead of letting the SDK hide it.
const nodeSdk = () => new BasisTheoryClient({ apiKey: key, baseUrl, maxRetries: 0, timeoutInSeconds: 10 });

/** What a failed call was: an HTTP status with its Retry-After, or a connection that broke without an answer. */
function describe(error) {
  if (typeof error?.statusCode === 'number') {
    const headers = error.rawResponse?.headers;
    const retryAfter = typeof headers?.get === 'function' ? headers.get('retry-after') : undefined;
    return { status: error.statusCode, retryAfter: retryAfter ?? null, body: error.body };
  }
  return { status: 'no-answer', error: String(error?.message ?? error) };
}

/**
 * basis-theory-js speaks HTTPS to every host but `localhost`, so it reaches the plain-HTTP ClusterIP through a TCP
 * relay on localhost: the bytes still go through the Service (kube-proxy picks the pod per connection).
 */
async function localhostRelay(target) {
  const { hostname, port } = new URL(target);
  const relay = createServer((socket) => {
    const upstream = connect(Number(port), hostname);
    socket.pipe(upstream).pipe(socket);
    const close = () => (socket.destroy(), upstream.destroy());
    socket.on('error', close);
    upstream.on('error', close);
  });
  await new Promise((resolve) => relay.listen(0, '127.0.0.1', resolve));
  return { url: `http://localhost:${relay.address().port}`, close: () => relay.close() };
}

/** Reads answer the card masked (the sample application reads with token:read, not a reveal rule). */
const sameCard = (data) => data?.number?.endsWith(CARD.number.slice(-4)) && data?.expiration_year === CARD.expiration_year;

async function smoke() {
  const [reactorId] = rest;
  const client = nodeSdk();
  const started = Date.now();
  const token = await client.tokens.create({ type: 'card', data: CARD });
  if (!token.id) fail(`token create answered without an id: ${JSON.stringify(token)}`);
  const relay = await localhostRelay(baseUrl);
  try {
    const js = await new BasisTheory().init(key, { apiBaseUrl: relay.url, disableTelemetry: true });
    const read = await js.tokens.retrieve(token.id);
    if (!sameCard(read?.data)) fail(`token ${token.id} read back (basis-theory-js) differently: ${JSON.stringify(read?.data)}`);
  } finally {
    relay.close();
  }
  const answer = await client.reactors.react(reactorId, { args: { card: `{{ ${token.id} }}` } });
  if (answer?.raw?.last4 !== '4242' || typeof answer?.raw?.reference !== 'string') {
    fail(`the reactor answered ${JSON.stringify(answer)}, expected raw.last4 4242 and a reference`);
  }
  console.log(JSON.stringify({ token: token.id, reactor: answer.raw.last4, ms: Date.now() - started }));
}

async function load() {
  const [reactorId, secondsText, out] = rest;
  const deadline = Date.now() + Number(secondsText) * 1000;
  const maxCalls = 20000; // bounded in count as well as in time
  const client = nodeSdk();
  const summary = { calls: 0, ok: 0, acknowledged: [], failures: [], statuses: {} };
  let stopping = false;
  process.on('SIGTERM', () => (stopping = true));
  process.on('SIGINT', () => (stopping = true));
  const write = () => writeFileSync(out, JSON.stringify(summary));
  while (!stopping && Date.now() < deadline && summary.calls < maxCalls) {
    const reactor = summary.calls % 2 === 1 && summary.acknowledged.length > 0;
    summary.calls += 1;
    try {
      if (reactor) {
        const id = summary.acknowledged[summary.acknowledged.length - 1];
        const answer = await client.reactors.react(reactorId, { args: { card: `{{ ${id} }}` } });
        if (answer?.raw?.last4 !== '4242') throw new Error(`reactor answered ${JSON.stringify(answer)}`);
      } else {
        const token = await client.tokens.create({ type: 'card', data: CARD });
        summary.acknowledged.push(token.id);
      }
      summary.ok += 1;
      summary.statuses['200'] = (summary.statuses['200'] ?? 0) + 1;
    } catch (error) {
      const failure = { at: new Date().toISOString(), call: reactor ? 'react' : 'create', ...describe(error) };
      summary.failures.push(failure);
      summary.statuses[failure.status] = (summary.statuses[failure.status] ?? 0) + 1;
      await new Promise((resolve) => setTimeout(resolve, 100)); // a client backs off a little
    }
    if (summary.calls % 50 === 0) write();
  }
  write();
  const { acknowledged, failures, ...counts } = summary;
  console.log(JSON.stringify({ ...counts, acknowledged: acknowledged.length, failures: failures.length }));
}

async function verify() {
  const [file] = rest;
  const { acknowledged } = JSON.parse(readFileSync(file, 'utf8'));
  const client = nodeSdk();
  const missing = [];
  for (const id of acknowledged) {
    // A read-back as fast as one client can go meets the key's rate limit: a 429 (or a 503) with Retry-After is
    // waited out and asked again, as a well-behaved client does; anything else is a missing token.
    for (let attempt = 1; ; attempt++) {
      try {
        const token = await client.tokens.get(id);
        if (!sameCard(token?.data)) missing.push({ id, got: token?.data });
        break;
      } catch (error) {
        const failure = describe(error);
        if ((failure.status === 429 || failure.status === 503) && failure.retryAfter && attempt < 10) {
          await new Promise((resolve) => setTimeout(resolve, Number(failure.retryAfter) * 1000));
          continue;
        }
        missing.push({ id, ...failure });
        break;
      }
    }
  }
  console.log(JSON.stringify({ acknowledged: acknowledged.length, missing: missing.length }));
  if (missing.length > 0) fail(`${missing.length} acknowledged tokens do not read back: ${JSON.stringify(missing.slice(0, 5))}`);
}

async function react() {
  const [reactorId] = rest;
  const client = nodeSdk();
  const token = await client.tokens.create({ type: 'card', data: CARD });
  const answer = await client.reactors.react(reactorId, { args: { card: `{{ ${token.id} }}` } });
  console.log(JSON.stringify(answer?.raw ?? null));
}

/**
 * The echo pod answers with what it received ({ method, path, headers, body }); the proxy passes that answer back.
 * The card number must arrive in clear (detokenized on the way), with the credential the request transform adds.
 */
async function proxy() {
  const [proxyKey, credential] = rest;
  const client = nodeSdk();
  const token = await client.tokens.create({ type: 'card', data: CARD });
  const relay = await localhostRelay(baseUrl);
  try {
    const js = await new BasisTheory().init(key, { apiBaseUrl: relay.url, disableTelemetry: true });
    const echoed = await js.proxy.post({
      headers: { 'BT-PROXY-KEY': proxyKey },
      body: { number: `{{ ${token.id} | json: '$.number' }}`, note: 'e2e' },
    });
    const received = typeof echoed?.body === 'string' ? JSON.parse(echoed.body) : echoed?.body;
    if (received?.number !== CARD.number) {
      fail(`the echo received ${JSON.stringify(received)} (answer ${JSON.stringify(echoed)}), expected the detokenized number`);
    }
    if (credential && echoed?.headers?.authorization !== `Bearer ${credential}`) {
      fail(`the echo received no destination credential from the request transform: ${JSON.stringify(echoed?.headers)}`);
    }
    console.log(JSON.stringify({ token: token.id, echoed: 'number detokenized', path: echoed?.path }));
  } finally {
    relay.close();
  }
}

const commands = { smoke, load, verify, react, proxy };
if (!commands[command] || !baseUrl || !key) fail('usage: client.mjs smoke|load|verify BASE_URL KEY ...');
try {
  await commands[command]();
} catch (error) {
  fail(JSON.stringify(describe(error)));
}
