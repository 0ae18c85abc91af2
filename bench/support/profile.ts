// Reads a V8 CPU profile (node --cpu-prof) of the API and says where its time went during given time windows: self
// time by area (a src/ directory, a package, node internals, GC, idle), the hottest functions, and the src/
// functions with the most time under them. Compiled frames in dist/ are mapped back to src/*.ts lines through the
// source maps tsc writes next to them.
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { formatCount, table } from './report.js';

interface CallFrame {
  functionName: string;
  url: string;
  lineNumber: number;
  columnNumber: number;
}

interface ProfileNode {
  id: number;
  callFrame: CallFrame;
  children?: number[];
}

interface CpuProfile {
  nodes: ProfileNode[];
  startTime: number;
  samples: number[];
  timeDeltas: number[];
}

export interface Window {
  startUs: number;
  endUs: number;
}

/**
 * Components a request's CPU time is charged to: each busy sample goes to the component of its leaf-most frame
 * that belongs to one (node's own streams, timers and event loop belong to none; the caller decides).
 */
const COMPONENTS: Array<[name: string, match: (area: string, label: string) => boolean]> = [
  [
    'etcd client (etcd3, grpc-js, http2, protobuf)',
    (area, label) =>
      /^node_modules\/(etcd3|@grpc\/|cockatiel|protobufjs|@protobufjs\/|long)/.test(area) ||
      / node:internal\/http2\//.test(label),
  ],
  [
    'HTTP server (node http: parse, write response)',
    (_area, label) =>
      / node:_http_|node:internal\/http:| HTTPParser|parserOnHeadersComplete|parserOnIncoming/.test(label),
  ],
  [
    'express, router, body-parser & co',
    (area) =>
      /^node_modules\/(express|router|body-parser|raw-body|type-is|content-type|on-finished|finalhandler|parseurl|path-to-regexp|iconv-lite|media-typer|mime-types|mime-db|send|statuses|depd|http-errors|qs|accepts|negotiator|vary|encodeurl|escape-html|cookie|content-disposition|fresh|range-parser|etag|merge-descriptors|safe-buffer|debug|ms|bytes|unpipe|destroy|ee-first)$/.test(
        area,
      ),
  ],
  [
    'logging (pino)',
    (area) =>
      /^node_modules\/(pino|sonic-boom|@pinojs\/|fast-redact|thread-stream|on-exit-leak-free|quick-format-unescaped|atomic-sleep|safe-stable-stringify)/.test(
        area,
      ),
  ],
  ['metrics (prom-client)', (area) => /^node_modules\/(prom-client|tdigest|bintrees)/.test(area)],
  [
    'encryption, hashing (src/crypto, node:crypto)',
    (area, label) => area === 'src/crypto' || / node:internal\/crypto\//.test(label),
  ],
  ['JSON validation (ajv)', (area) => /^node_modules\/ajv/.test(area) || area === 'src/validation'],
  ['caches (lru-cache)', (area) => area === 'node_modules/lru-cache'],
  ['tokenvault code (other src/)', (area) => area.startsWith('src')],
  ['other packages', (area) => area.startsWith('node_modules/')],
  ['garbage collector', (area) => area === '(garbage collector)'],
];

interface Frame {
  /** e.g. `TokenService.create src/domain/tokens/service.ts:62`. */
  label: string;
  /** e.g. `src/domain/tokens`, `node_modules/@grpc/grpc-js`, `node internals`, `(garbage collector)`. */
  area: string;
  inSrc: boolean;
}

export interface SummaryOptions {
  /** The API's measured CPU time per request (from /proc, not from the profile): turns shares into µs. */
  cpuUsPerRequest?: number;
  /** Rows per table. Default 15. */
  top?: number;
  /** The profiled process, as the report names it. Default 'API'. */
  processName?: string;
}

/**
 * Profiles sample by wall clock: a sample taken while the API thread was runnable but waiting for a CPU (this
 * machine is shared by the clients, etcd and the API) is charged to the frame the thread was in, typically the
 * response's writev that had just woken a client. So shares are of wall time while not idle; the µs column
 * scales them to the CPU time the API really used per request.
 */
export function summarizeProfile(
  file: string,
  repoRoot: string,
  title: string,
  windows: Window[],
  options: SummaryOptions = {},
): string {
  const top = options.top ?? 15;
  const cpuUs = options.cpuUsPerRequest;
  const processName = options.processName ?? 'API';
  const profile = JSON.parse(readFileSync(file, 'utf8')) as CpuProfile;
  const nodes = new Map(profile.nodes.map((node) => [node.id, node]));
  const parent = new Map<number, number>();
  for (const node of profile.nodes) for (const child of node.children ?? []) parent.set(child, node.id);
  const frames = new Map<number, Frame>();
  const maps = new SourceMaps(repoRoot);
  const frameOf = (id: number) => {
    let frame = frames.get(id);
    if (!frame) frames.set(id, (frame = describe(nodes.get(id)!.callFrame, repoRoot, maps)));
    return frame;
  };

  const selfByArea = new Map<string, number>();
  const selfByFunction = new Map<string, number>();
  const totalBySrcFunction = new Map<string, number>();
  const totalByArea = new Map<string, number>();
  const byComponent = new Map<string, number>();
  let samples = 0;
  let idle = 0;
  let time = profile.startTime;
  for (let i = 0; i < profile.samples.length; i++) {
    time += profile.timeDeltas[i];
    if (!windows.some((w) => time >= w.startUs && time < w.endUs)) continue;
    samples++;
    const leaf = frameOf(profile.samples[i]);
    if (leaf.area === '(idle)') idle++;
    add(selfByArea, leaf.area);
    add(selfByFunction, leaf.label);
    let component: string | undefined;
    const seen = new Set<string>();
    for (let id: number | undefined = profile.samples[i]; id !== undefined; id = parent.get(id)) {
      const frame = frameOf(id);
      component ??= COMPONENTS.find(([, match]) => match(frame.area, frame.label))?.[0];
      if (frame.inSrc && !seen.has(frame.label)) {
        seen.add(frame.label);
        add(totalBySrcFunction, frame.label);
      }
      // Areas a request passes through anyway (node's event loop and streams, V8) would all be near 100%.
      if (!GENERIC_AREAS.has(frame.area) && !frame.area.startsWith('(') && !seen.has(`area:${frame.area}`)) {
        seen.add(`area:${frame.area}`);
        add(totalByArea, frame.area);
      }
    }
    if (leaf.area !== '(idle)')
      add(
        byComponent,
        component ?? (leaf.area === '(program)' ? '(program): native code, V8' : 'node event loop, streams, timers'),
      );
  }
  if (samples === 0) return `${title}: no profile samples fall in the measured windows`;

  const busy = samples - idle;
  const share = (n: number, of: number) => `${((n / of) * 100).toFixed(1)}%`;
  const rows = (counts: Map<string, number>, of: number, skipIdle = true, limit = top) =>
    [...counts]
      .filter(([name]) => !skipIdle || (name !== '(idle)' && !name.startsWith('(idle)')))
      .sort((a, b) => b[1] - a[1])
      .slice(0, limit)
      .map(([name, n]) => [name, share(n, of)]);
  const perRequest = (table: string[][]) =>
    table.map(([name, shareText]) => [
      name,
      shareText,
      cpuUs === undefined ? '-' : ((Number.parseFloat(shareText) / 100) * cpuUs).toFixed(0),
    ]);
  const seconds = windows.reduce((sum, w) => sum + (w.endUs - w.startUs) / 1e6, 0);
  return [
    `${title}: ${windows.length} window(s), ${seconds.toFixed(1)} s, ${formatCount(samples)} samples, ${processName} busy ${share(busy, samples)} of the time` +
      (cpuUs === undefined ? '' : `; measured ${processName} CPU per request ${formatCount(cpuUs)} µs`),
    '',
    table(
      ['busy time by component (leaf-most frame that belongs to one)', 'share', '≈ µs/request'],
      perRequest(rows(byComponent, busy, true, 100)),
    ),
    '',
    table(['self time by area (share of busy time)', 'share'], rows(selfByArea, busy)),
    '',
    table(['total time by area (the area or what it calls, share of busy time)', 'share'], rows(totalByArea, busy)),
    '',
    table(['hottest functions (self time, share of busy time)', 'share'], rows(selfByFunction, busy)),
    '',
    table(
      ['src/ functions by total time (self + callees, share of busy time)', 'share'],
      rows(totalBySrcFunction, busy),
    ),
  ].join('\n');
}

const GENERIC_AREAS = new Set(['node internals', 'V8 builtins', 'other']);

function add(counts: Map<string, number>, key: string): void {
  counts.set(key, (counts.get(key) ?? 0) + 1);
}

function describe(frame: CallFrame, repoRoot: string, maps: SourceMaps): Frame {
  const name = frame.functionName || '(anonymous)';
  const { url } = frame;
  if (url === '') return { label: name, area: name.startsWith('(') ? name : 'V8 builtins', inSrc: false };
  if (url.startsWith('node:'))
    return { label: `${name} ${url}:${frame.lineNumber + 1}`, area: 'node internals', inSrc: false };
  const file = url.startsWith('file://') ? fileURLToPath(url) : url;
  const relative = path.relative(repoRoot, file);
  const inModules = /(?:^|\/)node_modules\/((?:@[^/]+\/)?[^/]+)\/(.*)$/.exec(relative);
  if (inModules)
    return {
      label: `${name} ${inModules[1]}/${inModules[2]}:${frame.lineNumber + 1}`,
      area: `node_modules/${inModules[1]}`,
      inSrc: false,
    };
  if (relative.startsWith('dist/')) {
    const original = maps.original(file, frame.lineNumber, frame.columnNumber);
    const source = original?.source ?? `src/${relative.slice('dist/'.length).replace(/\.js$/, '.ts')}`;
    const line = original ? original.line + 1 : frame.lineNumber + 1;
    return { label: `${name} ${source}:${line}`, area: path.dirname(source), inSrc: true };
  }
  return {
    label: `${name} ${relative}:${frame.lineNumber + 1}`,
    area: relative.startsWith('..') ? 'other' : path.dirname(relative),
    inSrc: false,
  };
}

// --- source maps (version 3, "mappings" only) --------------------------------------------------------------------

type Segment = [generatedColumn: number, source: number, line: number, column: number];

class SourceMaps {
  private readonly loaded = new Map<string, { sources: string[]; lines: Segment[][] } | undefined>();

  constructor(private readonly repoRoot: string) {}

  /** The src/ position of a 0-based line and column in a compiled file, when its map is there. */
  original(file: string, line: number, column: number): { source: string; line: number } | undefined {
    if (!this.loaded.has(file)) this.loaded.set(file, this.load(file));
    const map = this.loaded.get(file);
    const segments = map?.lines[line];
    if (!map || !segments || segments.length === 0) return undefined;
    let best = segments[0];
    for (const segment of segments) if (segment[0] <= column) best = segment;
    return { source: map.sources[best[1]], line: best[2] };
  }

  private load(file: string) {
    const mapFile = `${file}.map`;
    if (!existsSync(mapFile)) return undefined;
    const raw = JSON.parse(readFileSync(mapFile, 'utf8')) as {
      sources: string[];
      sourceRoot?: string;
      mappings: string;
    };
    const sources = raw.sources.map((source) =>
      path.relative(this.repoRoot, path.resolve(path.dirname(file), raw.sourceRoot ?? '', source)),
    );
    const lines: Segment[][] = [];
    const state = [0, 0, 0, 0]; // source, line, column persist across lines; generated column resets per line
    for (const text of raw.mappings.split(';')) {
      const segments: Segment[] = [];
      let generatedColumn = 0;
      for (const encoded of text.split(',')) {
        if (encoded === '') continue;
        const values = decodeVlq(encoded);
        generatedColumn += values[0];
        if (values.length >= 4) {
          state[0] += values[1];
          state[1] += values[2];
          state[2] += values[3];
          segments.push([generatedColumn, state[0], state[1], state[2]]);
        }
      }
      lines.push(segments);
    }
    return { sources, lines };
  }
}

const BASE64 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';

function decodeVlq(text: string): number[] {
  const values: number[] = [];
  let value = 0;
  let shift = 0;
  for (const char of text) {
    const digit = BASE64.indexOf(char);
    value += (digit & 31) << shift;
    if (digit & 32) {
      shift += 5;
    } else {
      values.push(value & 1 ? -(value >>> 1) : value >>> 1);
      value = 0;
      shift = 0;
    }
  }
  return values;
}
