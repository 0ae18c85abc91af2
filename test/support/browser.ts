// A real headless Chromium (Debian's, found by hack/chromium.sh: TOKENVAULT_CHROMIUM_BIN) driven by puppeteer-core,
// and a page server of its own, for the tests of what a checkout page does from another origin than the vault's.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import puppeteer, { type Browser } from 'puppeteer-core';

/** Chromium's binary: hack/test.sh sets TOKENVAULT_CHROMIUM_BIN; Debian's path otherwise. */
export function chromiumPath(): string {
  return process.env.TOKENVAULT_CHROMIUM_BIN ?? '/usr/lib/chromium/chromium';
}

/**
 * Launches headless Chromium. `--no-sandbox`: the tests run as root here, where Chromium's sandbox refuses to start;
 * the pages it loads are the tests' own. Certificates are checked as a browser would (no ignore flag): a test that
 * serves HTTPS passes its CA's SPKI hash in `trustSpki` (Chromium's --ignore-certificate-errors-spki-list).
 */
export async function launchBrowser(options: { trustSpki?: string[]; args?: string[] } = {}): Promise<Browser> {
  const args = ['--no-sandbox', '--disable-dev-shm-usage', '--no-first-run', '--disable-gpu', ...(options.args ?? [])];
  if (options.trustSpki?.length) args.push(`--ignore-certificate-errors-spki-list=${options.trustSpki.join(',')}`);
  return puppeteer.launch({ executablePath: chromiumPath(), headless: true, args, timeout: 30_000 });
}

export interface PageServer {
  /** `http://127.0.0.1:<port>`: a different origin from a vault on `http://localhost:<port>`. */
  origin: string;
  close(): Promise<void>;
}

/** Serves fixed files (path → [content type, body]) on loopback; anything else is 404. */
export async function servePages(
  files: Record<string, [contentType: string, body: string | Buffer]>,
  host = '127.0.0.1',
): Promise<PageServer> {
  const server: Server = createServer((req, res) => {
    const file = files[new URL(req.url ?? '/', 'http://x').pathname];
    if (!file) {
      res.writeHead(404).end();
      return;
    }
    res.writeHead(200, { 'content-type': file[0] }).end(file[1]);
  });
  await new Promise<void>((resolve) => server.listen(0, host, resolve));
  const { port } = server.address() as AddressInfo;
  return {
    origin: `http://${host}:${port}`,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

let bundle: Promise<string> | undefined;

/**
 * The official basis-theory-js as a page loads it: its npm package ships no browser bundle (the files list leaves
 * `*.bundle.js` out), so it is bundled here the way a checkout page's build would, with esbuild for the browser
 * (axios takes its XMLHttpRequest adapter; `os` is the package's own os-browserify). The page gets
 * `window.BasisTheoryJs.BasisTheory`.
 */
export function basisTheoryBundle(): Promise<string> {
  bundle ??= import('esbuild').then(async ({ build }) => {
    const built = await build({
      entryPoints: ['node_modules/@basis-theory/basis-theory-js/index.js'],
      bundle: true,
      platform: 'browser',
      format: 'iife',
      globalName: 'BasisTheoryJs',
      alias: { os: 'os-browserify/browser' },
      define: { 'process.env.NODE_ENV': '"production"' },
      write: false,
      logLevel: 'silent',
    });
    return built.outputFiles[0].text;
  });
  return bundle;
}
