// The outbound destination policy against SSRF: every destination form below must be refused unless its host name is
// allow-listed, on the real connect path (undici Agent + the policy's connector) with an injected resolver. Everything
// stays on loopback: refused names never get a connection, allowed ones reach the HTTPS servers started here.

import { afterAll, afterEach, beforeAll, describe, expect, test } from '@jest/globals';
import net from 'node:net';
import tls from 'node:tls';
import type { Readable } from 'node:stream';
import { fetch, request } from 'undici';
import { Errors, VaultError, type VaultErrorClass } from '../../src/errors/registry.js';
import { stripZone } from '../../src/proxy/addresses.js';
import {
  classifyAddress,
  DestinationPolicy,
  outboundRequest,
  type DestinationPolicyOptions,
  type Resolver,
} from '../../src/proxy/destination-policy.js';
import { startHttpsServer, type Handler, type HttpsTestServer } from '../support/https.js';

const routes: Record<string, Handler> = {
  '/ok': (req, res) => res.end(`ok via ${req.socket.localAddress}`),
  '/redirect-metadata': (_req, res) => {
    res.writeHead(302, { location: 'https://169.254.169.254/latest/meta-data/iam/security-credentials/' });
    res.end();
  },
  '/redirect-name': (_req, res) => {
    res.writeHead(307, { location: 'https://evil.tokenvault.test/steal' });
    res.end();
  },
  '/echo-host': (req, res) => res.end(String(req.headers.host)),
  '/hang': () => {}, // never answers
  '/stall-body': (_req, res) => {
    res.writeHead(200, { 'content-type': 'text/plain' });
    res.write('partial');
  },
  '/big': (_req, res) => {
    res.writeHead(200, { 'content-length': '2048' });
    res.end(Buffer.alloc(2048, 'a'));
  },
  '/big-chunked': (_req, res) => {
    res.writeHead(200, { 'content-type': 'application/octet-stream' });
    for (let i = 0; i < 8; i++) res.write(Buffer.alloc(256, 'b'));
    res.end();
  },
};
const router: Handler = (req, res) => {
  const route = routes[new URL(req.url ?? '/', 'https://x').pathname];
  if (route) route(req, res);
  else res.writeHead(404).end();
};

let server: HttpsTestServer; // 127.0.0.1
let internal: HttpsTestServer; // 127.0.0.2: stands for a private service in the rebinding tests
const policies: DestinationPolicy[] = [];

beforeAll(async () => {
  server = await startHttpsServer(router);
  internal = await startHttpsServer((_req, res) => res.end('internal'), { host: '127.0.0.2' });
});
afterEach(async () => {
  await Promise.all(policies.splice(0).map((policy) => policy.close()));
});
afterAll(async () => {
  await Promise.all([server.close(), internal.close()]);
});

/** A resolver answering from a table, recording every name it is asked for. */
function resolver(table: Record<string, string[] | (() => string[])>): { lookup: Resolver; calls: string[] } {
  const calls: string[] = [];
  const lookup: Resolver = async (hostname) => {
    calls.push(hostname);
    const entry = table[hostname];
    if (entry === undefined) {
      throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND' });
    }
    const addresses = typeof entry === 'function' ? entry() : entry;
    return addresses.map((address) => ({ address, family: net.isIPv6(stripZone(address)) ? 6 : 4 }));
  };
  return { lookup, calls };
}

function makePolicy(options: Partial<DestinationPolicyOptions> = {}): DestinationPolicy {
  const policy = new DestinationPolicy({ allowedHosts: [], caFile: server.caFile, connectTimeoutMs: 2000, ...options });
  policies.push(policy);
  return policy;
}

async function rejection(promise: Promise<unknown>, errorClass: VaultErrorClass): Promise<VaultError> {
  const error = await promise.then(
    () => new Error('the request succeeded'),
    (caught: unknown) => caught,
  );
  expect(error).toBeInstanceOf(errorClass);
  return error as VaultError;
}

// Names resolving to addresses that must not be reached. Each is refused after resolution, before any connection.
const RESOLVED_FORMS: Array<[string, string[]]> = [
  ['loopback', ['127.0.0.1']],
  ['loopback-range', ['127.53.0.9']],
  ['private-10', ['10.0.0.5']],
  ['private-172', ['172.16.3.4']],
  ['private-172-top', ['172.31.255.254']],
  ['private-192', ['192.168.1.1']],
  ['metadata', ['169.254.169.254']],
  ['ecs-metadata', ['169.254.170.2']],
  ['link-local', ['169.254.10.20']],
  ['cgnat', ['100.64.0.1']],
  ['alibaba-metadata', ['100.100.100.200']],
  ['this-network', ['0.0.0.0']],
  ['benchmarking', ['198.18.0.1']],
  ['documentation', ['192.0.2.10']],
  ['future-use', ['240.0.0.1']],
  ['broadcast', ['255.255.255.255']],
  ['multicast', ['224.0.0.251']],
  ['ipv6-loopback', ['::1']],
  ['ipv6-unspecified', ['::']],
  ['ipv6-link-local', ['fe80::1']],
  ['ipv6-link-local-zone', ['fe80::1%lo']],
  ['ipv6-unique-local', ['fd12:3456:789a::1']],
  ['aws-metadata-v6', ['fd00:ec2::254']],
  ['ipv4-mapped-loopback', ['::ffff:127.0.0.1']],
  ['ipv4-mapped-metadata', ['::ffff:a9fe:a9fe']],
  ['nat64-loopback', ['64:ff9b::7f00:1']],
  ['6to4-private', ['2002:c0a8:0101::1']],
  ['ipv6-multicast', ['ff02::1']],
  ['public-then-private', ['8.8.8.8', '10.0.0.1']],
  ['public-v6-then-loopback', ['2606:4700:4700::1111', '::1']],
];

// URL forms refused before any lookup: IP literals in every notation, credentials, other schemes.
const URL_FORMS = (port: number): string[] => [
  `https://127.0.0.1:${port}/ok`,
  `https://127.0.0.1.:${port}/ok`,
  `https://2130706433:${port}/ok`,
  `https://0x7f000001:${port}/ok`,
  `https://0177.0.0.1:${port}/ok`,
  `https://127.1:${port}/ok`,
  `https://127.0.0.%31:${port}/ok`,
  `https://[::1]:${port}/ok`,
  `https://[::ffff:127.0.0.1]:${port}/ok`,
  `https://[::ffff:7f00:1]:${port}/ok`,
  `https://[0:0:0:0:0:0:0:1]:${port}/ok`,
  `https://169.254.169.254/latest/meta-data/`,
  `https://[fd00:ec2::254]/latest/meta-data/`,
  `https://localhost:${port}@127.0.0.1:${port}/ok`,
  `https://127.0.0.1:${port}#@localhost`,
  `http://localhost:${server.port}/ok`,
  `ftp://localhost/`,
  `file:///etc/passwd`,
  `gopher://localhost:${port}/`,
  `ws://localhost:${port}/`,
];

describe('refused destinations', () => {
  test.each(RESOLVED_FORMS)('a name resolving to %s (%j) is refused', async (label, addresses) => {
    const name = `${label}.tokenvault.test`;
    const { lookup, calls } = resolver({ [name]: addresses });
    const policy = makePolicy({ lookup, allowedHosts: ['localhost'] });
    const before = server.requests.length;
    const error = await rejection(
      outboundRequest(policy, { url: `https://${name}:${server.port}/ok` }),
      Errors.DestinationRefused,
    );
    expect(error.status).toBe(400);
    expect(error.detail).toMatch(/non-public address|cannot be connected to/);
    for (const address of addresses) expect(error.detail).not.toContain(address);
    expect(calls).toEqual([name]);
    expect(server.requests.length).toBe(before);
  });

  test('every URL form is refused without a lookup or a connection', async () => {
    const { lookup, calls } = resolver({ localhost: ['127.0.0.1'] });
    const policy = makePolicy({ lookup, allowedHosts: ['localhost', '127.0.0.1', '::1'] });
    const forms = URL_FORMS(server.port);
    for (const url of forms) {
      const error = await rejection(outboundRequest(policy, { url }), Errors.DestinationRefused);
      expect(error.detail).toMatch(/DNS name|https|user name/);
    }
    expect(forms.length).toBe(20);
    expect(calls).toEqual([]);
    expect(server.requests.length).toBe(0);
  });

  test('the dispatcher enforces the policy on its own, without checkUrl', async () => {
    const { lookup, calls } = resolver({ 'private.tokenvault.test': ['10.0.0.1'], localhost: ['127.0.0.1'] });
    const policy = makePolicy({ lookup, allowedHosts: ['localhost'] });
    const direct = (url: string) => request(url, { dispatcher: policy.dispatcher });
    await rejection(direct(`https://127.0.0.1:${server.port}/ok`), Errors.DestinationRefused);
    await rejection(direct(`https://[::ffff:127.0.0.1]:${server.port}/ok`), Errors.DestinationRefused);
    await rejection(direct(`http://localhost:${server.port}/ok`), Errors.DestinationRefused);
    await rejection(direct(`https://private.tokenvault.test:${server.port}/ok`), Errors.DestinationRefused);
    // fetch (the reactor bridge) reports the policy's error as the cause
    const failure = await fetch(`https://private.tokenvault.test:${server.port}/ok`, {
      dispatcher: policy.dispatcher,
    }).then(
      () => undefined,
      (error: unknown) => error as Error,
    );
    expect(failure?.cause).toBeInstanceOf(Errors.DestinationRefused);
    expect(calls).toEqual(['private.tokenvault.test', 'private.tokenvault.test']);
    expect(server.requests.length).toBe(0);
  });

  test('allow-listing one name does not allow another name resolving to the same address', async () => {
    const { lookup } = resolver({ localhost: ['127.0.0.1'], 'other.tokenvault.test': ['127.0.0.1'] });
    const policy = makePolicy({ lookup, allowedHosts: ['localhost'] });
    const ok = await outboundRequest(policy, { url: `https://localhost:${server.port}/ok` });
    expect(ok.status).toBe(200);
    await rejection(
      outboundRequest(policy, { url: `https://other.tokenvault.test:${server.port}/ok` }),
      Errors.DestinationRefused,
    );
  });
});

describe('allowed destinations and TLS', () => {
  test('an allow-listed localhost is reached with certificate verification (system resolver)', async () => {
    const policy = makePolicy({ allowedHosts: ['localhost'] });
    const response = await outboundRequest(policy, { url: `${server.url}/ok` });
    expect(response.status).toBe(200);
    expect(response.body.toString()).toBe('ok via 127.0.0.1');
  });

  test('the Host header is always the destination', async () => {
    const policy = makePolicy({ allowedHosts: ['localhost'], lookup: resolver({ localhost: ['127.0.0.1'] }).lookup });
    const response = await outboundRequest(policy, {
      url: `${server.url}/echo-host`,
      headers: { Host: 'metadata.google.internal' },
    });
    expect(response.body.toString()).toBe(`localhost:${server.port}`);
  });

  test('without the CA the certificate is not trusted: 502', async () => {
    const policy = makePolicy({ allowedHosts: ['localhost'], caFile: undefined });
    const error = await rejection(outboundRequest(policy, { url: `${server.url}/ok` }), Errors.UpstreamUnreachable);
    expect(error.status).toBe(502);
    expect(error.detail).toMatch(
      /TLS handshake .* failed \((UNABLE_TO_VERIFY_LEAF_SIGNATURE|SELF_SIGNED_CERT_IN_CHAIN)\)/,
    );
  });

  test('NODE_TLS_REJECT_UNAUTHORIZED=0 does not turn verification off', async () => {
    const policy = makePolicy({ allowedHosts: ['localhost'], caFile: undefined });
    const saved = process.env.NODE_TLS_REJECT_UNAUTHORIZED;
    process.env.NODE_TLS_REJECT_UNAUTHORIZED = '0';
    try {
      await rejection(outboundRequest(policy, { url: `${server.url}/ok` }), Errors.UpstreamUnreachable);
    } finally {
      if (saved === undefined) delete process.env.NODE_TLS_REJECT_UNAUTHORIZED;
      else process.env.NODE_TLS_REJECT_UNAUTHORIZED = saved;
    }
  });

  test('the certificate is checked against the host name, not the address connected to', async () => {
    const { lookup } = resolver({ 'elsewhere.example': ['127.0.0.1'] });
    const policy = makePolicy({ allowedHosts: ['elsewhere.example'], lookup });
    const error = await rejection(
      outboundRequest(policy, { url: `https://elsewhere.example:${server.port}/ok` }),
      Errors.UpstreamUnreachable,
    );
    expect(error.detail).toMatch(/ERR_TLS_CERT_ALTNAME_INVALID/);
  });

  test('a server offering only TLS 1.1 is refused', async () => {
    const old = await startHttpsServer(routes['/ok'], {
      tls: { minVersion: 'TLSv1', maxVersion: 'TLSv1.1', ciphers: 'DEFAULT@SECLEVEL=0' },
    });
    try {
      // The server does work for a client that accepts TLS 1.1...
      const protocol = await new Promise<string | null>((resolve, reject) => {
        const socket = tls.connect({
          host: '127.0.0.1',
          port: old.port,
          servername: 'localhost',
          ca: old.caPem,
          minVersion: 'TLSv1',
          ciphers: 'DEFAULT@SECLEVEL=0',
        });
        socket.once('secureConnect', () => {
          resolve(socket.getProtocol());
          socket.destroy();
        });
        socket.once('error', reject);
      });
      expect(protocol).toBe('TLSv1.1');
      // ...but not for the policy.
      const policy = makePolicy({ allowedHosts: ['localhost'], lookup: resolver({ localhost: ['127.0.0.1'] }).lookup });
      const error = await rejection(
        outboundRequest(policy, { url: `https://localhost:${old.port}/ok` }),
        Errors.UpstreamUnreachable,
      );
      expect(error.detail).toMatch(/TLS handshake .*(PROTOCOL_VERSION|UNSUPPORTED_PROTOCOL)/);
    } finally {
      await old.close();
    }
  });

  test('a closed port is 502', async () => {
    const closed = await new Promise<number>((resolve) => {
      const probe = net.createServer().listen(0, '127.0.0.1', () => {
        const { port } = probe.address() as net.AddressInfo;
        probe.close(() => resolve(port));
      });
    });
    const policy = makePolicy({ allowedHosts: ['localhost'], lookup: resolver({ localhost: ['127.0.0.1'] }).lookup });
    const error = await rejection(
      outboundRequest(policy, { url: `https://localhost:${closed}/` }),
      Errors.UpstreamUnreachable,
    );
    expect(error.detail).toBe('The destination refused the connection.');
  });

  test('the next resolved address is tried when one refuses the connection', async () => {
    const { lookup } = resolver({ localhost: ['::1', '127.0.0.1'] }); // nothing listens on ::1 at this port
    const policy = makePolicy({ allowedHosts: ['localhost'], lookup });
    const response = await outboundRequest(policy, { url: `${server.url}/ok` });
    expect(response.body.toString()).toBe('ok via 127.0.0.1');
  });

  test('a name that does not resolve is 502', async () => {
    const policy = makePolicy({ lookup: resolver({}).lookup });
    const error = await rejection(
      outboundRequest(policy, { url: 'https://nowhere.tokenvault.test/' }),
      Errors.UpstreamUnreachable,
    );
    expect(error.detail).toBe('The destination host name could not be resolved (ENOTFOUND).');
  });

  test('a TLS handshake that never completes is bounded by the connect timeout: 502', async () => {
    const silent = net.createServer(() => {}); // accepts, never speaks TLS
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    const connections = new Set<net.Socket>();
    silent.on('connection', (socket) => connections.add(socket));
    try {
      const policy = makePolicy({
        allowedHosts: ['localhost'],
        lookup: resolver({ localhost: ['127.0.0.1'] }).lookup,
        connectTimeoutMs: 300,
      });
      const started = Date.now();
      const error = await rejection(
        outboundRequest(policy, { url: `https://localhost:${(silent.address() as net.AddressInfo).port}/` }),
        Errors.UpstreamUnreachable,
      );
      expect(error.detail).toBe('Connecting to the destination timed out.');
      expect(Date.now() - started).toBeLessThan(2000);
    } finally {
      for (const socket of connections) socket.destroy();
      await new Promise((resolve) => silent.close(resolve));
    }
  });
});

describe('redirects', () => {
  test('a redirect to the metadata address is returned, not followed', async () => {
    const { lookup, calls } = resolver({ localhost: ['127.0.0.1'] });
    const policy = makePolicy({ allowedHosts: ['localhost'], lookup });
    const before = server.requests.length;
    const response = await outboundRequest(policy, { url: `${server.url}/redirect-metadata` });
    expect(response.status).toBe(302);
    expect(response.headers.location).toBe('https://169.254.169.254/latest/meta-data/iam/security-credentials/');
    expect(calls).toEqual(['localhost']);
    expect(server.requests.length).toBe(before + 1);
  });

  test('a redirect to another name is returned without looking that name up', async () => {
    const { lookup, calls } = resolver({ localhost: ['127.0.0.1'], 'evil.tokenvault.test': ['127.0.0.1'] });
    const policy = makePolicy({ allowedHosts: ['localhost'], lookup });
    const response = await outboundRequest(policy, { url: `${server.url}/redirect-name`, method: 'POST', body: 'x' });
    expect(response.status).toBe(307);
    expect(response.headers.location).toBe('https://evil.tokenvault.test/steal');
    expect(calls).toEqual(['localhost']);
  });

  test('a client that follows redirects through the dispatcher is still stopped at the refused hop', async () => {
    const { lookup } = resolver({ localhost: ['127.0.0.1'] });
    const policy = makePolicy({ allowedHosts: ['localhost'], lookup });
    const failure = await fetch(`${server.url}/redirect-metadata`, { dispatcher: policy.dispatcher }).then(
      () => undefined,
      (error: unknown) => error as Error,
    );
    expect(failure?.cause).toBeInstanceOf(Errors.DestinationRefused);
  });
});

describe('DNS rebinding', () => {
  // 127.0.0.1 stands for a public address here; 127.0.0.2 (the internal server) stays loopback.
  const publicStandIn = (address: string) => (address === '127.0.0.1' ? 'public' : classifyAddress(address));

  test('each connection is resolved once and goes to the address that was checked', async () => {
    let answers = 0;
    const { lookup, calls } = resolver({
      'rebind.tokenvault.test': () => (answers++ === 0 ? ['127.0.0.1'] : ['127.0.0.2']),
    });
    const policy = makePolicy({ lookup, classifyAddress: publicStandIn });
    const url = `https://rebind.tokenvault.test:${server.port}/ok`;

    // First connection: the only lookup answers the "public" address, and that is where the request goes. A second
    // lookup at connect time (check-then-connect) would have answered 127.0.0.2.
    const first = await outboundRequest(policy, { url, headers: { connection: 'close' } });
    expect(first.status).toBe(200);
    expect(first.body.toString()).toBe('ok via 127.0.0.1');
    expect(calls).toEqual(['rebind.tokenvault.test']);

    // The next connection resolves again, gets the rebound private answer and is refused.
    await rejection(outboundRequest(policy, { url }), Errors.DestinationRefused);
    expect(calls).toEqual(['rebind.tokenvault.test', 'rebind.tokenvault.test']);
    expect(internal.requests).toEqual([]);
  });

  test('one lookup per connection; kept-alive connections are reused without one', async () => {
    const { lookup, calls } = resolver({ 'pool.tokenvault.test': ['127.0.0.1'] });
    const policy = makePolicy({ lookup, classifyAddress: publicStandIn });
    const before = server.requests.length;
    for (let i = 0; i < 6; i++) {
      const response = await outboundRequest(policy, { url: `https://pool.tokenvault.test:${server.port}/ok` });
      expect(response.status).toBe(200);
    }
    const connections = new Set(server.requests.slice(before).map((entry) => entry.remotePort));
    expect(calls.length).toBe(connections.size);
    expect(connections.size).toBeLessThan(6);
  });

  test('an answer mixing the public address with a private one is refused as a whole', async () => {
    const { lookup } = resolver({ 'mixed.tokenvault.test': ['127.0.0.1', '127.0.0.2'] });
    const policy = makePolicy({ lookup, classifyAddress: publicStandIn });
    await rejection(
      outboundRequest(policy, { url: `https://mixed.tokenvault.test:${server.port}/ok` }),
      Errors.DestinationRefused,
    );
    expect(internal.requests).toEqual([]);
  });

  test('the allow-listed internal name does reach the internal server', async () => {
    const { lookup } = resolver({ 'internal.tokenvault.test': ['127.0.0.2'] });
    const policy = makePolicy({ lookup, allowedHosts: ['internal.tokenvault.test'] });
    const response = await outboundRequest(policy, { url: `https://internal.tokenvault.test:${internal.port}/` });
    expect(response.body.toString()).toBe('internal');
    expect(internal.requests).toHaveLength(1);
    internal.requests.length = 0;
  });
});

describe('timeouts and response limits', () => {
  const local = () =>
    makePolicy({ allowedHosts: ['localhost'], lookup: resolver({ localhost: ['127.0.0.1'] }).lookup });

  test('no response headers in time is 504', async () => {
    const error = await rejection(
      outboundRequest(local(), { url: `${server.url}/hang`, headersTimeoutMs: 300 }),
      Errors.UpstreamTimeout,
    );
    expect(error.status).toBe(504);
  });

  test('a stalled body is 504', async () => {
    const error = await rejection(
      outboundRequest(local(), { url: `${server.url}/stall-body`, bodyTimeoutMs: 300 }),
      Errors.UpstreamTimeout,
    );
    expect(error.detail).toBe('The destination stopped sending the response body.');
  });

  test('a response larger than allowed is 502, whether declared or chunked', async () => {
    const policy = local();
    for (const path of ['/big', '/big-chunked']) {
      const error = await rejection(
        outboundRequest(policy, { url: `${server.url}${path}`, maxResponseBytes: 1024 }),
        Errors.UpstreamResponseTooLarge,
      );
      expect(error.status).toBe(502);
    }
    const fits = await outboundRequest(policy, { url: `${server.url}/big-chunked`, maxResponseBytes: 2048 });
    expect(fits.body.length).toBe(2048);
  });

  test('a streamed body is limited while it is read', async () => {
    const policy = local();
    const read = async (body: Readable) => {
      let total = 0;
      for await (const chunk of body as AsyncIterable<Buffer>) total += chunk.length;
      return total;
    };
    const ok = await outboundRequest(policy, { url: `${server.url}/big-chunked`, stream: true });
    expect(ok.status).toBe(200);
    expect(await read(ok.body)).toBe(2048);
    const tooBig = await outboundRequest(policy, {
      url: `${server.url}/big-chunked`,
      stream: true,
      maxResponseBytes: 1000,
    });
    await rejection(read(tooBig.body), Errors.UpstreamResponseTooLarge);
    const stalled = await outboundRequest(policy, {
      url: `${server.url}/stall-body`,
      stream: true,
      bodyTimeoutMs: 300,
    });
    await rejection(read(stalled.body), Errors.UpstreamTimeout);
  });
});
