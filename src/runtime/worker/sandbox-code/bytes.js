// @ts-check
// UTF-8, hex digits and base64, shared by Buffer, TextEncoder/TextDecoder, URLSearchParams and atob/btoa.
import { ArrayBufferCtor, ErrorCtor, fromCharCode, isView, ReflectApply, StringCtor, Uint8ArrayCtor } from './intrinsics.js';

export function utf8Encode(input) {
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
export function utf8Decode(bytes) {
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
export function hexDigit(c) {
  if (c >= 48 && c <= 57) return c - 48;
  if (c >= 97 && c <= 102) return c - 87;
  if (c >= 65 && c <= 70) return c - 55;
  return -1;
}
export function toBytes(value) {
  if (value instanceof Uint8ArrayCtor) return value;
  if (value instanceof ArrayBufferCtor) return new Uint8ArrayCtor(value);
  if (isView(value)) return new Uint8ArrayCtor(value.buffer, value.byteOffset, value.byteLength);
  return utf8Encode(value);
}
/** A copy in a plain Uint8Array (a Buffer's slice() is a view, like Node's), for the host and for keeping. */
export function copyBytes(value) { return new Uint8ArrayCtor(toBytes(value)); }
export const B64 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';
export function btoaImpl(input) {
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
export function atobImpl(input) {
  // The forgiving-base64 decode: padding is dropped only from a length that is a multiple of 4 ('YQ=' is invalid).
  let s = StringCtor(input).replace(/[\t\n\f\r ]/g, '');
  if (s.length % 4 === 0) s = s.replace(/={1,2}$/, '');
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
