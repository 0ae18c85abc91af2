// The JavaScript that runs inside every sandbox context before the reactor's code: the `require` allow-list, the
// reactor-formulas SDK error classes, the `bt` client, `fetch`, timers and a few web globals, all implemented here as
// plain JS (Node's `Buffer` and the WHATWG `URL` are in prelude-node.ts, spliced in below). The host is reached only
// through two plain functions (isolated-vm Callbacks, which arrive as ordinary functions, not References):
// `__tv_call(id, op, json, body)` starts an asynchronous host operation whose answer
// comes back through `entry('settle', ...)`, and `__tv_sync(op, json, parts)` answers small synchronous questions
// (random UUIDs, hashes, key comparison). The prelude takes both off the global object before any reactor code runs,
// so reactor code can never call them directly, and nothing in the context leads back to the host's objects.
//
// The completion value of the script is `entry(mode, ...)`: `entry('start', reqJson, hasBt, kind)` runs the reactor,
// whose answer, a JSON envelope (`{"t":"ok","r":...}` or a failure description), reaches the host as the operation
// `done`; `entry('settle', id, ok, json, bytes)` answers a host operation. The host validates every envelope: nothing the code does to built-ins can make
// the host misbehave, only fail that one invocation.

import { NODE_COMPAT_SOURCE } from './prelude-node.js';

/** Modules `require` serves, in the order the error message lists them. */
export const ALLOWED_MODULES = [
  '@basis-theory/basis-theory-js',
  '@basis-theory/basis-theory-reactor-formulas-sdk-js',
  'buffer',
  'crypto',
  'node-fetch',
  'url',
  'uuid',
] as const;

/**
 * The wrapper the reactor's code is compiled in (CommonJS-style, like Node); kept in step with domain/formulas/code.ts.
 * The script's completion value must not be a function: isolated-vm hands a function result to the host as a callable
 * that keeps the whole context alive, so every run would leak its context. `void 0` comes last whatever the code is.
 */
export function wrapReactorCode(code: string): string {
  return `globalThis.__tv_module = (function (module, exports, require) {\n${code}\n});\nvoid 0;`;
}

export const PRELUDE_SOURCE = String.raw`(function () {
'use strict';
const g = globalThis;
const hostCall = g.__tv_call;
const hostSync = g.__tv_sync;
delete g.__tv_call;
delete g.__tv_sync;
// Nothing a reactor needs, and each widens what code could do with the isolate.
delete g.SharedArrayBuffer;
delete g.Atomics;
delete g.WebAssembly;

// Intrinsics captured before reactor code can replace them.
const JSONparse = JSON.parse;
const JSONstringify = JSON.stringify;
const ObjectFreeze = Object.freeze;
const ObjectKeys = Object.keys;
const ObjectDefineProperty = Object.defineProperty;
const ArrayIsArray = Array.isArray;
const ReflectApply = Reflect.apply;
const StringCtor = String;
const NumberCtor = Number;
const ErrorCtor = Error;
const TypeErrorCtor = TypeError;
const RangeErrorCtor = RangeError;
const ObjectSetPrototypeOf = Object.setPrototypeOf;
const ObjectGetOwnPropertyDescriptor = Object.getOwnPropertyDescriptor;
const MathTrunc = Math.trunc;
const MathMin = Math.min;
const MathMax = Math.max;
const MathPow = Math.pow;
const SymbolToPrimitive = Symbol.toPrimitive;
const SymbolToStringTag = Symbol.toStringTag;
const WeakMapCtor = WeakMap;
const DataViewCtor = DataView;
const PromiseCtor = Promise;
const MapCtor = Map;
const Uint8ArrayCtor = Uint8Array;
const ArrayBufferCtor = ArrayBuffer;
const isView = ArrayBuffer.isView;
const fromCharCode = String.fromCharCode;
const mapGet = Map.prototype.get;
const mapSet = Map.prototype.set;
const mapDelete = Map.prototype.delete;
const mapHas = Map.prototype.has;
const mapClear = Map.prototype.clear;
const mapForEach = Map.prototype.forEach;
const promiseThen = Promise.prototype.then;
const MAX_PENDING = 64;
const MAX_CALLS = 1000;
const MAX_TIMERS = 1000;
const MAX_MESSAGE = 2000;

// ---------------------------------------------------------------------------------------------- host operations
const pending = new MapCtor();
let nextCall = 0;
let calls = 0;
let finished = false;
// What the code may pass to the host in one invocation, counted here before anything is copied out of the isolate
// (the host counts again): the host's TOKENVAULT_SANDBOX_HOST_LIMIT_BYTES and TOKENVAULT_REACTOR_RESULT_LIMIT_BYTES.
let hostBytes = 0;
let hostLimit = Infinity;
let resultLimit = Infinity;
function sizeOf(value) {
  if (typeof value === 'string') return value.length;
  if (value !== null && typeof value === 'object' && typeof value.byteLength === 'number') return value.byteLength;
  return 0;
}
// Charges what is about to go to the host; past the limit the invocation ends (the host answers it, whatever the
// code does with the error) and the caller gets an error instead of the copy.
function chargeHost(bytes) {
  hostBytes += bytes;
  if (hostBytes <= hostLimit) return;
  if (!finished) {
    finished = true;
    ReflectApply(mapClear, timers, []);
    hostCall(0, 'limit', '{}');
  }
  throw new ErrorCtor('the code passed more than ' + hostLimit + ' bytes to the host in one invocation (TOKENVAULT_SANDBOX_HOST_LIMIT_BYTES)');
}
function hostOperation(op, payload, body) {
  return new PromiseCtor(function (resolve, reject) {
    if (finished) return reject(new ErrorCtor('the invocation has ended'));
    const json = JSONstringify(payload);
    try {
      chargeHost(json.length + sizeOf(body));
    } catch (error) {
      return reject(error);
    }
    // Timers have their own cap (MAX_TIMERS); every other operation counts against these two.
    if (op !== 'sleep' && ++calls > MAX_CALLS) return reject(new ErrorCtor('too many calls to the host in one invocation (at most ' + MAX_CALLS + ')'));
    if (op !== 'sleep' && pending.size >= MAX_PENDING + timers.size) return reject(new ErrorCtor('too many concurrent calls to the host (at most ' + MAX_PENDING + ')'));
    const id = ++nextCall;
    ReflectApply(mapSet, pending, [id, { resolve: resolve, reject: reject }]);
    hostCall(id, op, json, body);
  });
}
function settle(id, ok, json, bytes) {
  const waiter = ReflectApply(mapGet, pending, [id]);
  if (waiter === undefined) return;
  ReflectApply(mapDelete, pending, [id]);
  if (!ok) return waiter.reject(new ErrorCtor(json));
  const value = JSONparse(json);
  if (bytes !== undefined && value !== null && typeof value === 'object') value.bytes = bytes;
  waiter.resolve(value);
}
function sync(op, payload, parts) {
  const json = JSONstringify(payload === undefined ? null : payload);
  chargeHost(json.length);
  return hostSync(op, json, parts);
}

// ---------------------------------------------------------------------------------------------- console (discarded)
const noop = function () {};
const consoleObject = {};
['log', 'info', 'warn', 'error', 'debug', 'trace', 'dir', 'table', 'time', 'timeEnd', 'timeLog', 'group', 'groupEnd', 'assert', 'count'].forEach(function (name) { consoleObject[name] = noop; });
g.console = consoleObject;

// ---------------------------------------------------------------------------------------------- UTF-8, base64
function utf8Encode(input) {
  const s = StringCtor(input);
  const out = [];
  for (let i = 0; i < s.length; i++) {
    let c = s.charCodeAt(i);
    if (c >= 0xd800 && c <= 0xdbff && i + 1 < s.length) {
      const d = s.charCodeAt(i + 1);
      if (d >= 0xdc00 && d <= 0xdfff) { c = 0x10000 + ((c - 0xd800) << 10) + (d - 0xdc00); i++; } else c = 0xfffd;
    } else if (c >= 0xd800 && c <= 0xdfff) c = 0xfffd;
    if (c < 0x80) out.push(c);
    else if (c < 0x800) out.push(0xc0 | (c >> 6), 0x80 | (c & 63));
    else if (c < 0x10000) out.push(0xe0 | (c >> 12), 0x80 | ((c >> 6) & 63), 0x80 | (c & 63));
    else out.push(0xf0 | (c >> 18), 0x80 | ((c >> 12) & 63), 0x80 | ((c >> 6) & 63), 0x80 | (c & 63));
  }
  return new Uint8ArrayCtor(out);
}
// The WHATWG decoder (as TextDecoder and Node's Buffer#toString): each maximal invalid subsequence is one U+FFFD.
function utf8Decode(bytes) {
  let out = '';
  let chunk = [];
  let needed = 0, seen = 0, lower = 0x80, upper = 0xbf, cp = 0;
  for (let i = 0; i < bytes.length; i++) {
    const b = bytes[i];
    if (needed === 0) {
      if (b < 0x80) chunk.push(b);
      else if (b >= 0xc2 && b <= 0xdf) { needed = 1; cp = b & 0x1f; }
      else if (b >= 0xe0 && b <= 0xef) { if (b === 0xe0) lower = 0xa0; else if (b === 0xed) upper = 0x9f; needed = 2; cp = b & 0xf; }
      else if (b >= 0xf0 && b <= 0xf4) { if (b === 0xf0) lower = 0x90; else if (b === 0xf4) upper = 0x8f; needed = 3; cp = b & 7; }
      else chunk.push(0xfffd);
    } else if (b < lower || b > upper) {
      needed = seen = cp = 0; lower = 0x80; upper = 0xbf;
      chunk.push(0xfffd);
      i--;
    } else {
      lower = 0x80; upper = 0xbf;
      cp = (cp << 6) | (b & 0x3f);
      if (++seen === needed) {
        if (cp >= 0x10000) { cp -= 0x10000; chunk.push(0xd800 + (cp >> 10), 0xdc00 + (cp & 1023)); } else chunk.push(cp);
        needed = seen = cp = 0;
      }
    }
    if (chunk.length > 8192) { out += ReflectApply(fromCharCode, null, chunk); chunk = []; }
  }
  if (needed !== 0) chunk.push(0xfffd);
  return out + ReflectApply(fromCharCode, null, chunk);
}
function hexDigit(c) {
  if (c >= 48 && c <= 57) return c - 48;
  if (c >= 97 && c <= 102) return c - 87;
  if (c >= 65 && c <= 70) return c - 55;
  return -1;
}
function toBytes(value) {
  if (value instanceof Uint8ArrayCtor) return value;
  if (value instanceof ArrayBufferCtor) return new Uint8ArrayCtor(value);
  if (isView(value)) return new Uint8ArrayCtor(value.buffer, value.byteOffset, value.byteLength);
  return utf8Encode(value);
}
/** A copy in a plain Uint8Array (a Buffer's slice() is a view, like Node's), for the host and for keeping. */
function copyBytes(value) { return new Uint8ArrayCtor(toBytes(value)); }
const B64 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';
function btoaImpl(input) {
  const s = StringCtor(input);
  let out = '';
  for (let i = 0; i < s.length; i += 3) {
    const a = s.charCodeAt(i), b = s.charCodeAt(i + 1), c = s.charCodeAt(i + 2);
    if (a > 255 || b > 255 || c > 255) throw new ErrorCtor('btoa: the string contains characters outside of Latin1');
    const n = (a << 16) | ((b || 0) << 8) | (c || 0);
    out += B64[(n >> 18) & 63] + B64[(n >> 12) & 63] + (i + 1 < s.length ? B64[(n >> 6) & 63] : '=') + (i + 2 < s.length ? B64[n & 63] : '=');
  }
  return out;
}
function atobImpl(input) {
  const s = StringCtor(input).replace(/[\t\n\f\r ]/g, '').replace(/={1,2}$/, '');
  if (/[^A-Za-z0-9+/]/.test(s) || s.length % 4 === 1) throw new ErrorCtor('atob: the string is not valid base64');
  let out = '';
  for (let i = 0; i < s.length; i += 4) {
    const n = (B64.indexOf(s[i]) << 18) | (B64.indexOf(s[i + 1]) << 12) | ((i + 2 < s.length ? B64.indexOf(s[i + 2]) : 0) << 6) | (i + 3 < s.length ? B64.indexOf(s[i + 3]) : 0);
    out += fromCharCode((n >> 16) & 255);
    if (i + 2 < s.length) out += fromCharCode((n >> 8) & 255);
    if (i + 3 < s.length) out += fromCharCode(n & 255);
  }
  return out;
}

// ---------------------------------------------------------------------------------------------- URLSearchParams
// application/x-www-form-urlencoded, as URLSearchParams: UTF-8, '+' for spaces, lenient percent-decoding.
function formEncode(s) {
  const bytes = utf8Encode(s);
  let out = '';
  for (let i = 0; i < bytes.length; i++) {
    const b = bytes[i];
    if ((b >= 48 && b <= 57) || (b >= 65 && b <= 90) || (b >= 97 && b <= 122) || b === 42 || b === 45 || b === 46 || b === 95) out += fromCharCode(b);
    else if (b === 32) out += '+';
    else out += '%' + (b < 16 ? '0' : '') + b.toString(16).toUpperCase();
  }
  return out;
}
function formDecode(s) {
  s = s.replace(/\+/g, ' ');
  if (s.indexOf('%') < 0) return s;
  const bytes = utf8Encode(s);
  const out = [];
  for (let i = 0; i < bytes.length; i++) {
    const b = bytes[i];
    if (b === 37 && i + 2 < bytes.length && hexDigit(bytes[i + 1]) >= 0 && hexDigit(bytes[i + 2]) >= 0) {
      out.push(hexDigit(bytes[i + 1]) * 16 + hexDigit(bytes[i + 2]));
      i += 2;
    } else out.push(b);
  }
  return utf8Decode(out);
}
// Set by URL (prelude-node.ts) once it exists: a URL's searchParams write their changes through to its query.
let paramsChanged = null;

// Built on first use: most reactors touch none of this, and every invocation starts a fresh context.
function once(factory) {
  let built = false;
  let value;
  return function () {
    if (!built) { value = factory(); built = true; }
    return value;
  };
}
const web = once(function () {
  class TextEncoder {
    get encoding() { return 'utf-8'; }
    encode(input) { return utf8Encode(input === undefined ? '' : input); }
  }
  class TextDecoder {
    constructor(label) {
      const l = StringCtor(label === undefined ? 'utf-8' : label).toLowerCase();
      if (l !== 'utf-8' && l !== 'utf8') throw new TypeErrorCtor('TextDecoder: only utf-8 is available in reactors');
    }
    get encoding() { return 'utf-8'; }
    decode(input) { return input === undefined ? '' : utf8Decode(toBytes(input)); }
  }
  class URLSearchParams {
    constructor(init) {
      this._list = [];
      if (init === undefined || init === null) return;
      if (typeof init === 'string') {
        const text = init[0] === '?' ? init.slice(1) : init;
        for (const part of text.split('&')) {
          if (part === '') continue;
          const eq = part.indexOf('=');
          this._list.push(eq < 0 ? [formDecode(part), ''] : [formDecode(part.slice(0, eq)), formDecode(part.slice(eq + 1))]);
        }
      } else if (init instanceof URLSearchParams || ArrayIsArray(init) || (typeof init === 'object' && typeof init[Symbol.iterator] === 'function')) {
        for (const pair of init) {
          if (pair === null || typeof pair !== 'object' || pair.length !== 2) throw new TypeErrorCtor('Each query pair must be an iterable [name, value] tuple');
          this._list.push([StringCtor(pair[0]), StringCtor(pair[1])]);
        }
      } else if (typeof init === 'object') {
        for (const key of ObjectKeys(init)) this._list.push([key, StringCtor(init[key])]);
      }
    }
    append(name, value) { this._list.push([StringCtor(name), StringCtor(value)]); this._changed(); }
    delete(name) { name = StringCtor(name); this._list = this._list.filter(function (p) { return p[0] !== name; }); this._changed(); }
    get(name) { name = StringCtor(name); const found = this._list.find(function (p) { return p[0] === name; }); return found ? found[1] : null; }
    getAll(name) { name = StringCtor(name); return this._list.filter(function (p) { return p[0] === name; }).map(function (p) { return p[1]; }); }
    has(name) { name = StringCtor(name); return this._list.some(function (p) { return p[0] === name; }); }
    set(name, value) {
      name = StringCtor(name);
      const index = this._list.findIndex(function (p) { return p[0] === name; });
      if (index < 0) this._list.push([name, StringCtor(value)]);
      else {
        this._list[index][1] = StringCtor(value);
        this._list = this._list.filter(function (p, i) { return i <= index || p[0] !== name; });
      }
      this._changed();
    }
    sort() { this._list.sort(function (a, b) { return a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0; }); this._changed(); }
    _changed() { if (paramsChanged !== null) paramsChanged(this); }
    forEach(fn, thisArg) { for (const p of this._list) fn.call(thisArg, p[1], p[0], this); }
    keys() { return this._list.map(function (p) { return p[0]; })[Symbol.iterator](); }
    values() { return this._list.map(function (p) { return p[1]; })[Symbol.iterator](); }
    entries() { return this._list.map(function (p) { return [p[0], p[1]]; })[Symbol.iterator](); }
    [Symbol.iterator]() { return this.entries(); }
    get size() { return this._list.length; }
    toString() { return this._list.map(function (p) { return formEncode(p[0]) + '=' + formEncode(p[1]); }).join('&'); }
  }
  class Headers {
    constructor(init) {
      this._map = new MapCtor();
      if (init === undefined || init === null) return;
      if (init instanceof Headers) init.forEach((value, name) => this.append(name, value));
      else if (ArrayIsArray(init)) for (const pair of init) this.append(pair[0], pair[1]);
      else if (typeof init === 'object') for (const name of ObjectKeys(init)) {
        const value = init[name];
        if (ArrayIsArray(value)) for (const v of value) this.append(name, v);
        else if (value !== undefined) this.append(name, value);
      }
    }
    append(name, value) {
      const n = normalizeName(name);
      const v = StringCtor(value).trim();
      const existing = ReflectApply(mapGet, this._map, [n]);
      if (existing) existing.push(v); else ReflectApply(mapSet, this._map, [n, [v]]);
    }
    set(name, value) { ReflectApply(mapSet, this._map, [normalizeName(name), [StringCtor(value).trim()]]); }
    get(name) { const v = ReflectApply(mapGet, this._map, [normalizeName(name)]); return v ? v.join(', ') : null; }
    has(name) { return ReflectApply(mapHas, this._map, [normalizeName(name)]); }
    delete(name) { ReflectApply(mapDelete, this._map, [normalizeName(name)]); }
    forEach(fn, thisArg) { const self = this; ReflectApply(mapForEach, this._map, [function (v, n) { fn.call(thisArg, v.join(', '), n, self); }]); }
    entries() { const out = []; this.forEach(function (v, n) { out.push([n, v]); }); out.sort(function (a, b) { return a[0] < b[0] ? -1 : 1; }); return out[Symbol.iterator](); }
    keys() { const out = []; for (const e of this.entries()) out.push(e[0]); return out[Symbol.iterator](); }
    values() { const out = []; for (const e of this.entries()) out.push(e[1]); return out[Symbol.iterator](); }
    [Symbol.iterator]() { return this.entries(); }
    raw() { const out = {}; ReflectApply(mapForEach, this._map, [function (v, n) { out[n] = v.slice(); }]); return out; }
    _object() { const out = {}; ReflectApply(mapForEach, this._map, [function (v, n) { out[n] = v.join(', '); }]); return out; }
  }
  class Response {
    constructor(body, init) {
      const o = init || {};
      this._bytes = body === undefined || body === null ? new Uint8ArrayCtor(0) : toBytes(body);
      this.status = o.status === undefined ? 200 : NumberCtor(o.status);
      this.statusText = o.statusText === undefined ? '' : StringCtor(o.statusText);
      this.headers = o.headers instanceof Headers ? o.headers : new Headers(o.headers);
      this.url = o.url === undefined ? '' : StringCtor(o.url);
      this.redirected = false;
      this.type = 'basic';
    }
    get ok() { return this.status >= 200 && this.status < 300; }
    get bodyUsed() { return false; }
    get size() { return this._bytes.length; }
    text() { return PromiseCtor.resolve(utf8Decode(this._bytes)); }
    json() { const self = this; return new PromiseCtor(function (resolve) { resolve(JSONparse(utf8Decode(self._bytes))); }); }
    arrayBuffer() { return PromiseCtor.resolve(copyBytes(this._bytes).buffer); }
    buffer() { return PromiseCtor.resolve(nodeBuffer().Buffer.from(this._bytes)); }
    clone() { return new Response(copyBytes(this._bytes), { status: this.status, statusText: this.statusText, headers: new Headers(this.headers), url: this.url }); }
  }
  class FetchError extends ErrorCtor {
    constructor(message, type) { super(message); this.name = 'FetchError'; this.type = type || 'system'; }
  }
  function fetch(input, init) {
    return new PromiseCtor(function (resolve) {
      const options = init || {};
      const url = typeof input === 'string' ? input : nodeURL().isURL(input) ? input.href : input && typeof input.url === 'string' ? input.url : StringCtor(input);
      const method = StringCtor(options.method || 'GET').toUpperCase();
      const headers = new Headers(options.headers);
      let body = options.body;
      if (body === undefined || body === null) body = undefined;
      else if (body instanceof URLSearchParams) {
        if (!headers.has('content-type')) headers.set('content-type', 'application/x-www-form-urlencoded;charset=UTF-8');
        body = body.toString();
      } else if (body instanceof ArrayBufferCtor || isView(body)) body = copyBytes(body);
      else if (typeof body !== 'string') {
        body = StringCtor(body);
        if (!headers.has('content-type')) headers.set('content-type', 'text/plain;charset=UTF-8');
      } else if (!headers.has('content-type')) headers.set('content-type', 'text/plain;charset=UTF-8');
      if ((method === 'GET' || method === 'HEAD') && body !== undefined) throw new TypeErrorCtor('Request with GET/HEAD method cannot have body');
      resolve(ReflectApply(promiseThen, hostOperation('fetch', { url: url, method: method, headers: headers._object() }, body), [
        function (answer) {
          return new Response(answer.bytes, { status: answer.status, statusText: answer.statusText, headers: answer.headers, url: answer.url });
        },
        function (error) { throw new FetchError('request to ' + url + ' failed, reason: ' + error.message, 'system'); },
      ]));
    });
  }
  fetch.default = fetch;
  fetch.Headers = Headers;
  fetch.Response = Response;
  fetch.FetchError = FetchError;
  fetch.isRedirect = function (code) { return code === 301 || code === 302 || code === 303 || code === 307 || code === 308; };
  return { TextEncoder: TextEncoder, TextDecoder: TextDecoder, URLSearchParams: URLSearchParams, Headers: Headers, Response: Response, FetchError: FetchError, fetch: fetch };
});

${NODE_COMPAT_SOURCE}
// ---------------------------------------------------------------------------------------------- timers
const timers = new MapCtor();
let nextTimer = 0;
function setTimeoutImpl(fn, ms) {
  if (typeof fn !== 'function') throw new TypeErrorCtor('setTimeout: the callback must be a function');
  if (timers.size >= MAX_TIMERS) throw new ErrorCtor('too many timers (at most ' + MAX_TIMERS + ')');
  const args = [];
  for (let i = 2; i < arguments.length; i++) args.push(arguments[i]);
  const id = ++nextTimer;
  ReflectApply(mapSet, timers, [id, true]);
  const delay = NumberCtor(ms) > 0 ? NumberCtor(ms) : 0;
  ReflectApply(promiseThen, hostOperation('sleep', { ms: delay }), [function () {
    if (!ReflectApply(mapHas, timers, [id])) return;
    ReflectApply(mapDelete, timers, [id]);
    ReflectApply(fn, undefined, args);
  }, noop]);
  return id;
}
function clearTimeoutImpl(id) { ReflectApply(mapDelete, timers, [id]); }
function setImmediateImpl(fn) {
  const args = [];
  for (let i = 1; i < arguments.length; i++) args.push(arguments[i]);
  return ReflectApply(setTimeoutImpl, undefined, [fn, 0].concat(args));
}
function queueMicrotaskImpl(fn) {
  if (typeof fn !== 'function') throw new TypeErrorCtor('queueMicrotask: the callback must be a function');
  PromiseCtor.resolve().then(function () { fn(); });
}

// ---------------------------------------------------------------------------------------------- reactor-formulas SDK
let sdkLoaded = null;
const sdkModule = once(function () {
  const FALLBACK_ERROR = 'Something went wrong. Please try again. If the problem persists, please contact support@basistheory.com';
  function sanitizeErrors(errors) {
    const out = {};
    if (ArrayIsArray(errors)) out.error = errors.map(function (e) { return typeof e === 'object' && e !== null ? JSONstringify(e) : e === undefined || e === null ? FALLBACK_ERROR : StringCtor(e); });
    else if (errors !== null && typeof errors === 'object') {
      for (const key of ObjectKeys(errors)) {
        const value = errors[key];
        if (ArrayIsArray(value)) out[key] = value.map(function (e) { return typeof e === 'object' && e !== null ? JSONstringify(e) : e === undefined || e === null ? FALLBACK_ERROR : StringCtor(e); });
        else if (value !== null && typeof value === 'object') out[key] = [JSONstringify(value)];
        else if (value) out[key] = [StringCtor(value)];
        else out[key] = [FALLBACK_ERROR];
      }
    } else if (typeof errors === 'string') out.error = [errors];
    else if (errors) out.error = [StringCtor(errors)];
    else out.error = [FALLBACK_ERROR];
    return out;
  }
  class BasisTheoryReactorError extends ErrorCtor {
    constructor(options) {
      const o = options || {};
      super(o.message);
      this.name = 'BasisTheoryReactorError';
      this.status = o.status;
      this.errors = sanitizeErrors(o.errors);
      if (o.data !== undefined) this.data = o.data;
    }
    toRFC7807() { return { detail: this.message, status: this.status, errors: this.errors }; }
  }
  function sdkError(name, message, status) {
    const C = class extends BasisTheoryReactorError {
      constructor(errors) {
        super({ message: message, status: status, errors: errors, data: errors });
        this.name = name;
      }
    };
    ObjectDefineProperty(C, 'name', { value: name });
    return C;
  }
  const BadRequestError = sdkError('BadRequestError', 'Bad Request', 400);
  const AuthenticationError = sdkError('AuthenticationError', 'Authentication Failed', 401);
  const InvalidPaymentMethodError = sdkError('InvalidPaymentMethodError', 'Invalid Payment Method', 402);
  const AuthorizationError = sdkError('AuthorizationError', 'Forbidden', 403);
  const RateLimitError = sdkError('RateLimitError', 'Rate Limit Exceeded', 429);
  const ServiceUnavailableError = sdkError('ServiceUnavailableError', 'Service Unavailable', 503);
  class ReactorRuntimeError extends BasisTheoryReactorError {
    constructor(error) {
      const errors = error instanceof ErrorCtor ? [StringCtor(error.message)] : error;
      super({ message: 'Reactor Runtime Error', status: 500, errors: errors, data: error });
      this.name = 'ReactorRuntimeError';
      if (error && error.status !== undefined && !Number.isNaN(NumberCtor(error.status)) && Number.isInteger(NumberCtor(error.status))) this.status = NumberCtor(error.status);
    }
  }
  class InvalidReactorConfigurationError extends BasisTheoryReactorError {
    constructor(propertyName, propertyError) {
      const errors = {};
      errors[StringCtor(propertyName)] = [StringCtor(propertyError)];
      super({ message: 'Invalid Reactor Configuration', status: 400, errors: errors });
      this.name = 'InvalidReactorConfigurationError';
    }
  }
  class CustomHttpResponseError extends ErrorCtor {
    constructor(options) {
      super();
      const o = options || {};
      const status = NumberCtor.parseInt(o.status);
      if (status !== o.status || status < 100 || status > 599) throw new ErrorCtor('status is not a valid integer');
      this.name = 'CustomHttpResponseError';
      this.status = status;
      this.headers = o.headers === undefined || o.headers === null ? {} : o.headers;
      this.body = o.body === undefined || o.body === null ? {} : o.body;
    }
    toResponseBody() { return { status: this.status, headers: this.headers, body: this.body }; }
  }
  const formulasSdk = ObjectFreeze({
    BasisTheoryReactorError: BasisTheoryReactorError,
    AuthenticationError: AuthenticationError,
    AuthorizationError: AuthorizationError,
    BadRequestError: BadRequestError,
    CustomHttpResponseError: CustomHttpResponseError,
    CustomHttpResponse: CustomHttpResponseError,
    InvalidPaymentMethodError: InvalidPaymentMethodError,
    InvalidReactorConfigurationError: InvalidReactorConfigurationError,
    RateLimitError: RateLimitError,
    ReactorRuntimeError: ReactorRuntimeError,
    ServiceUnavailableError: ServiceUnavailableError,
  });
  sdkLoaded = { BasisTheoryReactorError: BasisTheoryReactorError, CustomHttpResponseError: CustomHttpResponseError };
  return formulasSdk;
});

// ---------------------------------------------------------------------------------------------- fetch
function normalizeName(name) {
  const n = StringCtor(name).toLowerCase();
  if (!/^[!#$%&'*+.^_|~0-9a-z-]+$/.test(n)) throw new TypeErrorCtor('invalid header name: ' + JSONstringify(StringCtor(name)));
  return n;
}

// ---------------------------------------------------------------------------------------------- bt (basis-theory-js)
const apiErrors = once(function () {
  class BasisTheoryApiError extends ErrorCtor {
    constructor(message, status, data) {
      super(message);
      this.name = 'BasisTheoryApiError';
      this.status = status;
      this.data = data;
    }
  }
  return BasisTheoryApiError;
});
function btRequest(op, params) {
  return ReflectApply(promiseThen, hostOperation('bt', { op: op, params: params }), [function (answer) {
    if (answer.status >= 200 && answer.status < 300) return answer.data === null ? undefined : answer.data;
    const BasisTheoryApiError = apiErrors();
    throw new BasisTheoryApiError(answer.message, answer.status, answer.data === null ? undefined : answer.data);
  }]);
}
let btClient = null;
function makeBtClient() {
  const tokens = ObjectFreeze({
    create: function (model, options) { return btRequest('tokens.create', { model: model, options: options }); },
    retrieve: function (id, options) { return btRequest('tokens.retrieve', { id: id, options: options }); },
    update: function (id, model, options) { return btRequest('tokens.update', { id: id, model: model, options: options }); },
    delete: function (id, options) { return ReflectApply(promiseThen, btRequest('tokens.delete', { id: id, options: options }), [function () { return undefined; }]); },
    list: function (query, options) { return btRequest('tokens.list', { query: query, options: options }); },
  });
  return ObjectFreeze({
    tokens: tokens,
    tokenize: function (payload, options) { return btRequest('tokenize', { payload: payload, options: options }); },
    detokenize: function (payload, options) { return btRequest('detokenize', { payload: payload, options: options }); },
  });
}

const basisTheoryJs = once(function () {
  class BasisTheory {
    init(apiKey) {
      const self = this;
      return new PromiseCtor(function (resolve) {
        if (btClient === null) throw new ErrorCtor('this reactor has no application, so it has no BasisTheory client (req.bt is null)');
        if (sync('keyMatches', { key: apiKey === undefined || apiKey === null ? '' : StringCtor(apiKey) }) !== 'true') {
          throw new ErrorCtor("reactors may only use their own application's key (the client given as req.bt)");
        }
        self.tokens = btClient.tokens;
        self.tokenize = btClient.tokenize;
        self.detokenize = btClient.detokenize;
        resolve(self);
      });
    }
  }
  return ObjectFreeze({ BasisTheory: BasisTheory, BasisTheoryApiError: apiErrors() });
});

// ---------------------------------------------------------------------------------------------- crypto, uuid
function randomUUID() { return sync('uuid'); }
const HASHES = ['md5', 'sha1', 'sha256', 'sha384', 'sha512'];
function digester(kind, algorithm, key) {
  const alg = StringCtor(algorithm).toLowerCase().replace(/-/g, '');
  if (HASHES.indexOf(alg) < 0) throw new ErrorCtor('Digest method not supported: ' + algorithm + ' (available: ' + HASHES.join(', ') + ')');
  const parts = [];
  if (key !== undefined) chargeHost(sizeOf(key));
  let done = false;
  const object = {
    update: function (data, encoding) {
      if (done) throw new ErrorCtor('Digest already called');
      let part;
      if (typeof data === 'string' && encoding !== undefined && encoding !== 'utf8' && encoding !== 'utf-8') part = copyBytes(nodeBuffer().Buffer.from(data, encoding));
      else if (typeof data === 'string') part = data;
      else part = copyBytes(data);
      // Every part is copied to the host at digest(): counted now, so a loop of updates stops before it piles up.
      chargeHost(sizeOf(part));
      parts.push(part);
      return object;
    },
    digest: function (encoding) {
      if (done) throw new ErrorCtor('Digest already called');
      done = true;
      const enc = encoding === undefined ? 'bytes' : StringCtor(encoding);
      if (['hex', 'base64', 'base64url', 'latin1', 'binary', 'bytes'].indexOf(enc) < 0) throw new ErrorCtor('digest(): unsupported encoding ' + enc);
      const out = sync('hash', { kind: kind, alg: alg, encoding: enc }, key === undefined ? parts : [typeof key === 'string' ? key : copyBytes(key)].concat(parts));
      return enc === 'bytes' ? nodeBuffer().Buffer.from(JSONparse(out)) : out;
    },
  };
  return object;
}
const cryptoModule = once(function () { return ObjectFreeze({
  randomUUID: randomUUID,
  createHash: function (algorithm) { return digester('hash', algorithm); },
  createHmac: function (algorithm, key) {
    if (key === undefined || key === null) throw new TypeErrorCtor('createHmac: a key is required');
    return digester('hmac', algorithm, key);
  },
}); });
const uuidModule = once(function () { return ObjectFreeze({
  v4: function () { return randomUUID(); },
  NIL: '00000000-0000-0000-0000-000000000000',
  validate: function (value) { return typeof value === 'string' && /^[0-9a-f]{8}-[0-9a-f]{4}-[1-8][0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/i.test(value); },
}); });

const urlModule = once(function () { return ObjectFreeze({ URL: nodeURL().URL, URLSearchParams: web().URLSearchParams }); });

// ---------------------------------------------------------------------------------------------- require
const MODULES = new MapCtor([
  ['@basis-theory/basis-theory-js', basisTheoryJs],
  ['@basis-theory/basis-theory-reactor-formulas-sdk-js', sdkModule],
  ['crypto', cryptoModule],
  ['node:crypto', cryptoModule],
  ['buffer', function () { return nodeBuffer().module; }],
  ['node:buffer', function () { return nodeBuffer().module; }],
  ['node-fetch', function () { return web().fetch; }],
  ['url', urlModule],
  ['node:url', urlModule],
  ['uuid', uuidModule],
]);
const ALLOWED = ${JSON.stringify(ALLOWED_MODULES.join(', '))};
function require(name) {
  const id = StringCtor(name);
  const found = ReflectApply(mapGet, MODULES, [id]);
  if (found === undefined) throw new ErrorCtor("module '" + id + "' is not available in reactors (allowed: " + ALLOWED + ')');
  return found();
}

// ---------------------------------------------------------------------------------------------- globals
function defineGlobal(name, value) {
  ObjectDefineProperty(g, name, { value: value, writable: true, configurable: true, enumerable: false });
}
defineGlobal('atob', atobImpl);
defineGlobal('btoa', btoaImpl);
defineGlobal('setTimeout', setTimeoutImpl);
defineGlobal('clearTimeout', clearTimeoutImpl);
defineGlobal('setImmediate', setImmediateImpl);
defineGlobal('clearImmediate', clearTimeoutImpl);
defineGlobal('queueMicrotask', queueMicrotaskImpl);
// The web classes, Buffer and URL become plain globals the first time anything reads (or replaces) one of them.
function lazyGlobal(name, factory) {
  ObjectDefineProperty(g, name, {
    configurable: true,
    enumerable: false,
    get: function () { const value = factory()[name]; defineGlobal(name, value); return value; },
    set: function (value) { defineGlobal(name, value); },
  });
}
['fetch', 'Headers', 'Response', 'URLSearchParams', 'TextEncoder', 'TextDecoder'].forEach(function (name) { lazyGlobal(name, web); });
lazyGlobal('Buffer', nodeBuffer);
lazyGlobal('URL', nodeURL);

// ---------------------------------------------------------------------------------------------- running the code
function messageOf(error) {
  let message;
  if (error instanceof ErrorCtor) message = StringCtor(error.message);
  else if (error !== null && typeof error === 'object' && typeof error.message === 'string') message = error.message;
  else message = StringCtor(error);
  return message.length > MAX_MESSAGE ? message.slice(0, MAX_MESSAGE) + '...' : message;
}
function envelope(value) {
  try {
    return JSONstringify(value);
  } catch (error) {
    return JSONstringify({ t: 'invalid_result', message: 'the error could not be serialized: ' + messageOf(error) });
  }
}
function describe(error) {
  try {
    // No SDK error can exist before the SDK module was required.
    if (sdkLoaded !== null && error instanceof sdkLoaded.CustomHttpResponseError) {
      return envelope({ t: 'custom', status: error.status, headers: error.headers, body: error.body });
    }
    if (sdkLoaded !== null && error instanceof sdkLoaded.BasisTheoryReactorError) {
      return envelope({ t: 'sdk', status: error.status, detail: messageOf(error), errors: error.errors });
    }
    return envelope({ t: 'thrown', message: messageOf(error) });
  } catch (inner) {
    return envelope({ t: 'thrown', message: 'the reactor threw a value that could not be read' });
  }
}
// The answer goes to the host as an operation of its own ('done'), so that the host's call into the isolate ends with
// the synchronous part of the code and the host can tell the code's own CPU time from waiting.
function finish(value) {
  if (finished) return;
  finished = true;
  ReflectApply(mapClear, timers, []);
  // A result past the limit is not copied out of the isolate at all.
  hostCall(0, 'done', typeof value === 'string' && value.length > resultLimit ? '{"t":"too_large"}' : value);
}
// The module is evaluated by the first invocation in a context; later ones the host runs in the same context (warm
// contexts: only invocations of the same reactor and configuration, only after one that succeeded with nothing left
// running) call its function again, as a warm serverless function would.
let exported = null;
function start(reqJson, hasBt, kind, limitsJson) {
  finished = false;
  calls = 0;
  hostBytes = 0;
  const limits = typeof limitsJson === 'string' ? JSONparse(limitsJson) : {};
  hostLimit = typeof limits.host === 'number' ? limits.host : Infinity;
  resultLimit = typeof limits.result === 'number' ? limits.result : Infinity;
  if (exported === null) {
    const wrapper = g.__tv_module;
    delete g.__tv_module;
    if (typeof wrapper !== 'function') return finish(envelope({ t: 'compile', message: 'the code did not define a module' }));
    const module = { exports: {} };
    try {
      ReflectApply(wrapper, module.exports, [module, module.exports, require]);
    } catch (error) {
      return finish(describe(error));
    }
    let candidate = module.exports;
    if (typeof candidate !== 'function' && candidate !== null && typeof candidate === 'object' && typeof candidate.default === 'function') candidate = candidate.default;
    if (typeof candidate !== 'function') {
      return finish(envelope({ t: 'compile', message: 'the code must export a function: module.exports = async function (req) { ... }' }));
    }
    exported = candidate;
  }
  const fn = exported;
  const input = JSONparse(reqJson);
  btClient = hasBt ? makeBtClient() : null;
  const req = { args: input.args, configuration: input.configuration, bt: btClient };
  if (kind === 'transform' && req.args !== null && typeof req.args === 'object') req.args.bt = btClient;
  ReflectApply(promiseThen, new PromiseCtor(function (resolve) { resolve(fn(req)); }), [
    function (result) {
      const type = typeof result;
      if (type === 'function' || type === 'symbol' || type === 'bigint') {
        return finish(envelope({ t: 'invalid_result', message: 'the code returned a ' + type + ', which is not JSON' }));
      }
      let json;
      try {
        json = JSONstringify(result === undefined ? null : result);
      } catch (error) {
        return finish(envelope({ t: 'invalid_result', message: 'the result is not JSON-serializable: ' + messageOf(error) }));
      }
      return finish('{"t":"ok","r":' + (json === undefined ? 'null' : json) + '}');
    },
    function (error) { return finish(describe(error)); },
  ]);
}
return function entry(mode, a, b, c, d) {
  if (mode === 'settle') return void settle(a, b, c, d);
  if (mode === 'start') return start(a, b, c, d);
};
})()`;
