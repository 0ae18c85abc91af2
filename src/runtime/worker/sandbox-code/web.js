// @ts-check
// The web globals (TextEncoder, TextDecoder, URLSearchParams, Headers, Response) and node-fetch's `fetch`, which asks
// the host (the outbound destination policy decides there).
import { nodeBuffer } from './buffer.js';
import { copyBytes, toBytes, utf8Decode, utf8Encode } from './bytes.js';
import { hostOperation } from './host.js';
import { ArrayBufferCtor, ArrayIsArray, ErrorCtor, isView, JSONparse, JSONstringify, MapCtor, mapDelete, mapForEach, mapGet, mapHas, mapSet, NumberCtor, ObjectKeys, once, PromiseCtor, promiseThen, ReflectApply, StringCtor, TypeErrorCtor, Uint8ArrayCtor } from './intrinsics.js';
import { urlSearchParams } from './url-search-params.js';
import { nodeURL } from './url.js';

function normalizeName(name) {
  const n = StringCtor(name).toLowerCase();
  if (!/^[!#$%&'*+.^_|~0-9a-z-]+$/.test(n)) throw new TypeErrorCtor('invalid header name: ' + JSONstringify(StringCtor(name)));
  return n;
}

export const web = once(function () {
  const URLSearchParams = urlSearchParams();
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
  class Headers {
    constructor(init) {
      this._map = new MapCtor();
      if (init === undefined || init === null) return;
      // A copy keeps the original's order (the order the host sends them in); forEach would sort.
      if (init instanceof Headers) ReflectApply(mapForEach, init._map, [(values, name) => this.append(name, values.join(', '))]);
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
    // In name order, as node-fetch's and the WHATWG Headers' iteration.
    forEach(fn, thisArg) { for (const e of this.entries()) fn.call(thisArg, e[1], e[0], this); }
    entries() { const out = []; ReflectApply(mapForEach, this._map, [function (v, n) { out.push([n, v.join(', ')]); }]); out.sort(function (a, b) { return a[0] < b[0] ? -1 : 1; }); return out[Symbol.iterator](); }
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
