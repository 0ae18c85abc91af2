// @ts-check
// URLSearchParams (the global, `url`'s export and a URL's `searchParams`).
// application/x-www-form-urlencoded, as URLSearchParams: UTF-8, '+' for spaces, lenient percent-decoding.
import { hexDigit, utf8Decode, utf8Encode } from './bytes.js';
import { ArrayIsArray, fromCharCode, ObjectKeys, once, StringCtor, TypeErrorCtor } from './intrinsics.js';

export function formEncode(s) {
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
export function formDecode(s) {
  s = s.replace(/\+/g, ' ');
  // Without escapes the text is its own value, unless it has lone surrogates: those become U+FFFD (a USVString), which
  // the UTF-8 round trip below does.
  if (s.indexOf('%') < 0 && !/[\ud800-\udfff]/.test(s)) return s;
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
// Set by URL (url.js) once it exists: a URL's searchParams write their changes through to its query.
let paramsChanged = null;
/** @param {(params: any) => void} listener */
export function onParamsChanged(listener) { paramsChanged = listener; }

export const urlSearchParams = once(function () {
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
  return URLSearchParams;
});
