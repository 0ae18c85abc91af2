#!/usr/bin/env node
// Bundles the card fields (web/elements/, docs/browser.md "Card fields") into dist/elements/v1/, which the API serves
// at /elements/v1/ (src/http/routes/elements.ts). `make build` runs it after tsc.
//   elements.js        the script merchants' pages load: a stable URL, revalidated (ETag)
//   frame.html         the fields' frame: a stable URL, revalidated; it names the files below
//   assets/frame.<hash>.js, assets/frame.<hash>.css   named by their content: cached for good (immutable)
import { createHash } from 'node:crypto';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const source = join(root, 'web/elements');
const out = join(root, 'dist/elements/v1');

const bundle = async (entry) => {
  const result = await build({
    entryPoints: [join(source, entry)],
    bundle: true,
    write: false,
    format: 'iife',
    platform: 'browser',
    // What the browsers Basis Theory's Elements support: evergreen ones.
    target: ['chrome100', 'firefox100', 'safari15'],
    minify: true,
    charset: 'utf8',
    legalComments: 'none',
    logLevel: 'silent',
  });
  return result.outputFiles[0].text;
};
const hashed = (name, ext, text) =>
  `assets/${name}.${createHash('sha256').update(text).digest('hex').slice(0, 16)}.${ext}`;

const [client, frame] = await Promise.all([bundle('client.ts'), bundle('frame.ts')]);
const css = readFileSync(join(source, 'frame.css'), 'utf8');
const frameJs = hashed('frame', 'js', frame);
const frameCss = hashed('frame', 'css', css);
const html = readFileSync(join(source, 'frame.html'), 'utf8')
  .replace('FRAME_JS', frameJs)
  .replace('FRAME_CSS', frameCss);

rmSync(out, { recursive: true, force: true });
mkdirSync(join(out, 'assets'), { recursive: true });
writeFileSync(join(out, 'elements.js'), client);
writeFileSync(join(out, 'frame.html'), html);
writeFileSync(join(out, frameJs), frame);
writeFileSync(join(out, frameCss), css);
