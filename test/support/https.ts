// Loopback HTTPS servers for outbound-call tests, with a certificate authority made for the run: a CA and one leaf
// (SAN DNS:localhost, DNS:*.tokenvault.test, IP:127.0.0.1, IP:::1) signed by it, both EC P-256, made once per test
// worker. DestinationPolicy trusts the CA through `caFile`, a temporary PEM file removed when the process exits.

import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import https from 'node:https';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { SecureContextOptions } from 'node:tls';
import { generate } from 'selfsigned';

export interface TestCertificates {
  /** The run's CA certificate (PEM). */
  caPem: string;
  /** A file holding caPem, for DestinationPolicyOptions.caFile. */
  caFile: string;
  /** The leaf certificate and its key (PEM). */
  cert: string;
  key: string;
}

/** Host names the leaf certificate is valid for, besides 127.0.0.1 and ::1. */
export const CERTIFICATE_NAMES = ['localhost', '*.tokenvault.test'];

let certificates: Promise<TestCertificates> | undefined;

/** The run's CA and leaf certificate, made on first use. */
export function testCertificates(): Promise<TestCertificates> {
  certificates ??= makeCertificates();
  return certificates;
}

/** A leaf certificate's use and the names it is valid for. */
export interface LeafOptions {
  serverAuth?: boolean;
  clientAuth?: boolean;
  /** DNS names; default localhost. */
  dnsNames?: string[];
  /** IP addresses; default 127.0.0.1. */
  ips?: string[];
}

/**
 * An EC P-256 certificate authority made for a test run, valid from a minute ago for `hours`, and a function that
 * signs leaf certificates with it (the servers and clients of the HTTPS and etcd TLS tests).
 */
export async function testAuthority(name: string, hours = 24) {
  const notBeforeDate = new Date(Date.now() - 60_000);
  const notAfterDate = new Date(Date.now() + hours * 3600_000);
  const ca = await generate([{ name: 'commonName', value: name }], {
    keyType: 'ec',
    algorithm: 'sha256',
    notBeforeDate,
    notAfterDate,
    extensions: [
      { name: 'basicConstraints', cA: true, critical: true },
      { name: 'keyUsage', keyCertSign: true, cRLSign: true, critical: true },
    ],
  });
  const leaf = (
    commonName: string,
    { serverAuth, clientAuth, dnsNames = ['localhost'], ips = ['127.0.0.1'] }: LeafOptions,
  ) =>
    generate([{ name: 'commonName', value: commonName }], {
      keyType: 'ec',
      algorithm: 'sha256',
      notBeforeDate,
      notAfterDate,
      ca: { key: ca.private, cert: ca.cert },
      extensions: [
        { name: 'basicConstraints', cA: false },
        { name: 'keyUsage', digitalSignature: true, critical: true },
        { name: 'extKeyUsage', ...(serverAuth ? { serverAuth } : {}), ...(clientAuth ? { clientAuth } : {}) },
        {
          name: 'subjectAltName',
          altNames: [
            ...dnsNames.map((value) => ({ type: 2 as const, value })),
            ...ips.map((ip) => ({ type: 7 as const, ip })),
          ],
        },
      ],
    });
  return { ca, leaf };
}

async function makeCertificates(): Promise<TestCertificates> {
  const { ca, leaf: sign } = await testAuthority('tokenvault test CA');
  const leaf = await sign('localhost', { serverAuth: true, dnsNames: CERTIFICATE_NAMES, ips: ['127.0.0.1', '::1'] });
  const directory = mkdtempSync(join(tmpdir(), 'tokenvault-ca-'));
  process.once('exit', () => rmSync(directory, { recursive: true, force: true }));
  const caFile = join(directory, 'ca.pem');
  writeFileSync(caFile, ca.cert);
  return { caPem: ca.cert, caFile, cert: leaf.cert, key: leaf.private };
}

export type Handler = (request: IncomingMessage, response: ServerResponse) => void;

export interface HttpsTestServer {
  /** `https://localhost:<port>` */
  url: string;
  port: number;
  /** The address listened on. */
  host: string;
  caPem: string;
  caFile: string;
  /** Requests received so far, with the local address each arrived on and the client's port (one per connection). */
  requests: Array<{ method: string; url: string; localAddress: string; remotePort: number }>;
  close(): Promise<void>;
}

export interface HttpsServerOptions {
  /** Address to listen on; default 127.0.0.1. */
  host?: string;
  /** Extra TLS settings (minVersion, maxVersion, ciphers...). */
  tls?: SecureContextOptions;
}

/** Starts an HTTPS server on a free loopback port with the run's certificate. */
export async function startHttpsServer(handler: Handler, options: HttpsServerOptions = {}): Promise<HttpsTestServer> {
  const { caPem, caFile, cert, key } = await testCertificates();
  const host = options.host ?? '127.0.0.1';
  const requests: HttpsTestServer['requests'] = [];
  const server = https.createServer({ key, cert, ...options.tls }, (request, response) => {
    requests.push({
      method: request.method ?? '',
      url: request.url ?? '',
      localAddress: request.socket.localAddress ?? '',
      remotePort: request.socket.remotePort ?? 0,
    });
    handler(request, response);
  });
  server.on('tlsClientError', () => {}); // refused handshakes are what some tests are about
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, host, () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  return {
    url: `https://localhost:${port}`,
    port,
    host,
    caPem,
    caFile,
    requests,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** Answers every request with `status` and `body`. */
export function respond(status: number, body = '', headers: Record<string, string> = {}): Handler {
  return (_request, response) => {
    response.writeHead(status, { 'content-type': 'text/plain', ...headers });
    response.end(body);
  };
}

/** Answers every request with a redirect to `location`. */
export function redirectTo(location: string, status = 302): Handler {
  return respond(status, '', { location });
}
