// @ts-check
// Node's `Buffer` ('buffer' and the global) as plain JavaScript: public reactor examples build Basic-auth headers with
// `Buffer.from(key + ':').toString('base64')`. A Uint8Array subclass (as in Node) with from/alloc/allocUnsafe/concat/
// isBuffer/isEncoding/byteLength/compare, and toString/write/fill/copy/equals/compare/indexOf/includes/slice/subarray/
// toJSON on instances; encodings utf8, hex, base64, base64url, latin1 (binary), ascii, utf16le (ucs2). Decoding is as
// lenient as Node's. Built on first use. test/unit/sandbox-shims.test.ts compares it with Node's own.
import { atobImpl, B64, btoaImpl, hexDigit, toBytes, utf8Decode, utf8Encode } from './bytes.js';
import { ArrayBufferCtor, ArrayIsArray, DataViewCtor, fromCharCode, isView, MathMax, MathMin, MathTrunc, NumberCtor, ObjectDefineProperty, ObjectFreeze, ObjectKeys, ObjectSetPrototypeOf, once, RangeErrorCtor, ReflectApply, StringCtor, SymbolToPrimitive, TypeErrorCtor, Uint8ArrayCtor } from './intrinsics.js';

export const nodeBuffer = once(function () {
  const U8 = Uint8ArrayCtor;
  const u8fill = U8.prototype.fill;
  const u8set = U8.prototype.set;
  const MAX_LENGTH = 4294967296;
  const HEX_PAIRS = [];
  for (let i = 0; i < 256; i++) HEX_PAIRS.push((i < 16 ? '0' : '') + i.toString(16));
  const B64URL = B64.slice(0, 62) + '-_';
  const B64_VALUES = [];
  for (let i = 0; i < 128; i++) B64_VALUES.push(-1);
  for (let i = 0; i < 64; i++) B64_VALUES[B64.charCodeAt(i)] = i;
  B64_VALUES[45] = 62;
  B64_VALUES[95] = 63;

  function received(value) {
    if (value === null) return 'Received null';
    if (value === undefined) return 'Received undefined';
    if (typeof value === 'function') return 'Received function ' + (value.name || '<anonymous>');
    if (typeof value === 'object') {
      const ctor = value.constructor;
      return ctor && typeof ctor.name === 'string' && ctor.name !== '' ? 'Received an instance of ' + ctor.name : 'Received ' + typeof value;
    }
    let shown = StringCtor(value);
    if (shown.length > 28) shown = shown.slice(0, 25) + '...';
    if (typeof value === 'string') shown = "'" + shown + "'";
    return 'Received type ' + typeof value + ' (' + shown + ')';
  }
  function codedError(Ctor, code, message) {
    const error = new Ctor(message);
    error.code = code;
    return error;
  }
  function normalizeEncoding(encoding) {
    if (encoding === undefined || encoding === null || encoding === '') return 'utf8';
    switch (StringCtor(encoding).toLowerCase()) {
      case 'utf8': case 'utf-8': return 'utf8';
      case 'hex': return 'hex';
      case 'base64': return 'base64';
      case 'base64url': return 'base64url';
      case 'latin1': case 'binary': return 'latin1';
      case 'ascii': return 'ascii';
      case 'ucs2': case 'ucs-2': case 'utf16le': case 'utf-16le': return 'utf16le';
      default: return undefined;
    }
  }
  function encodingOf(encoding) {
    const e = normalizeEncoding(encoding);
    if (e === undefined) throw codedError(TypeErrorCtor, 'ERR_UNKNOWN_ENCODING', 'Unknown encoding: ' + StringCtor(encoding));
    return e;
  }
  // Node's decoders: hex stops at the first pair that is not hex; base64 (either alphabet) skips what is not base64
  // and stops at '='.
  function stringToBytes(s, encoding) {
    switch (encoding) {
      case 'utf8': return utf8Encode(s);
      case 'hex': {
        const n = s.length >>> 1;
        const out = new U8(n);
        let i = 0;
        for (; i < n; i++) {
          const hi = hexDigit(s.charCodeAt(2 * i)), lo = hexDigit(s.charCodeAt(2 * i + 1));
          if (hi < 0 || lo < 0) break;
          out[i] = hi * 16 + lo;
        }
        return i === n ? out : new U8(out.buffer, 0, i);
      }
      case 'base64': case 'base64url': {
        const out = new U8(((s.length * 3) >>> 2) + 3);
        let acc = 0, bits = 0, n = 0;
        for (let i = 0; i < s.length; i++) {
          // Node reads a character past Latin-1 by its low byte ('š', U+0161, counts as 'a').
          const c = s.charCodeAt(i) & 255;
          if (c === 61) break;
          const v = c < 128 ? B64_VALUES[c] : -1;
          if (v < 0) continue;
          acc = ((acc << 6) | v) & 0xffffff;
          bits += 6;
          if (bits >= 8) { bits -= 8; out[n++] = (acc >> bits) & 255; }
        }
        return new U8(out.buffer, 0, n);
      }
      case 'utf16le': {
        const out = new U8(s.length * 2);
        for (let i = 0; i < s.length; i++) { const c = s.charCodeAt(i); out[2 * i] = c & 255; out[2 * i + 1] = c >> 8; }
        return out;
      }
      default: {
        const out = new U8(s.length);
        for (let i = 0; i < s.length; i++) out[i] = s.charCodeAt(i) & 255;
        return out;
      }
    }
  }
  function base64Encode(bytes, alphabet, pad) {
    let out = '';
    const n = bytes.length;
    let i = 0;
    for (; i + 2 < n; i += 3) {
      const v = (bytes[i] << 16) | (bytes[i + 1] << 8) | bytes[i + 2];
      out += alphabet[v >> 18] + alphabet[(v >> 12) & 63] + alphabet[(v >> 6) & 63] + alphabet[v & 63];
    }
    if (i < n) {
      const v = (bytes[i] << 16) | (i + 1 < n ? bytes[i + 1] << 8 : 0);
      out += alphabet[v >> 18] + alphabet[(v >> 12) & 63];
      if (i + 1 < n) out += alphabet[(v >> 6) & 63] + (pad ? '=' : '');
      else if (pad) out += '==';
    }
    return out;
  }
  function bytesToString(bytes, encoding) {
    switch (encoding) {
      case 'utf8': return utf8Decode(bytes);
      case 'hex': { let out = ''; for (let i = 0; i < bytes.length; i++) out += HEX_PAIRS[bytes[i]]; return out; }
      case 'base64': return base64Encode(bytes, B64, true);
      case 'base64url': return base64Encode(bytes, B64URL, false);
      case 'utf16le': {
        let out = '';
        for (let i = 0; i + 1 < bytes.length; i += 2) out += fromCharCode(bytes[i] | (bytes[i + 1] << 8));
        return out;
      }
      default: {
        const mask = encoding === 'ascii' ? 127 : 255;
        let out = '';
        for (let i = 0; i < bytes.length; i += 4096) {
          const chunk = [];
          const end = i + 4096 < bytes.length ? i + 4096 : bytes.length;
          for (let j = i; j < end; j++) chunk.push(bytes[j] & mask);
          out += ReflectApply(fromCharCode, null, chunk);
        }
        return out;
      }
    }
  }
  function utf8Length(s) {
    let n = 0;
    for (let i = 0; i < s.length; i++) {
      const c = s.charCodeAt(i);
      if (c < 0x80) n += 1;
      else if (c < 0x800) n += 2;
      else if (c >= 0xd800 && c <= 0xdbff && i + 1 < s.length && (s.charCodeAt(i + 1) & 0xfc00) === 0xdc00) { n += 4; i++; }
      else n += 3;
    }
    return n;
  }
  /** A plain Uint8Array over the bytes of a view, without copying. */
  function plain(view, start, end) { return new U8(view.buffer, view.byteOffset + start, end - start); }
  /** Node's offset arithmetic for slice/subarray: negative counts from the end; clamped to [0, length]. */
  function relative(value, length, fallback) {
    if (value === undefined) return fallback;
    let v = MathTrunc(NumberCtor(value));
    if (v !== v) v = 0;
    if (v < 0) { v += length; return v < 0 ? 0 : v; }
    return v > length ? length : v;
  }
  function checkUint8Array(value, name) {
    if (!(value instanceof U8)) throw codedError(TypeErrorCtor, 'ERR_INVALID_ARG_TYPE', 'The "' + name + '" argument must be an instance of Buffer or Uint8Array. ' + received(value));
  }

  // Like Node: a Uint8Array subclass for the instances, and a Buffer function (callable with or without new) sharing
  // its prototype, so that instanceof, species (map, filter, subarray) and Buffer.of work.
  class FastBuffer extends U8 {
    constructor(a, b, c) { super(a, b, c); }
  }
  const proto = FastBuffer.prototype;
  // Named by its property key: the bundler renames the binding (it keeps `Buffer` free for a global), and the function
  // must be named Buffer, as Node's is (error messages name a Buffer argument by its constructor's name).
  /** @type {any} */
  const Buffer = {
    Buffer: function (arg, encodingOrOffset, length) {
      if (typeof arg === 'number') {
        if (typeof encodingOrOffset === 'string') throw codedError(TypeErrorCtor, 'ERR_INVALID_ARG_TYPE', 'The "string" argument must be of type string. ' + received(arg));
        return alloc(arg);
      }
      return from(arg, encodingOrOffset, length);
    },
  }.Buffer;
  Buffer.prototype = proto;
  ObjectDefineProperty(proto, 'constructor', { value: Buffer, writable: true, configurable: true, enumerable: false });
  ObjectSetPrototypeOf(Buffer, U8);

  function checkSize(size) {
    if (typeof size !== 'number') throw codedError(TypeErrorCtor, 'ERR_INVALID_ARG_TYPE', 'The "size" argument must be of type number. ' + received(size));
    if (!(size >= 0 && size <= MAX_LENGTH)) throw codedError(RangeErrorCtor, 'ERR_OUT_OF_RANGE', 'The value of "size" is out of range. It must be >= 0 && <= ' + MAX_LENGTH + '. Received ' + size);
  }
  function alloc(size, fill, encoding) {
    checkSize(size);
    const buffer = new FastBuffer(MathTrunc(size));
    if (fill !== undefined && fill !== 0 && buffer.length > 0) fillBytes(buffer, fill, 0, buffer.length, encoding);
    return buffer;
  }
  function allocUnsafe(size) { checkSize(size); return new FastBuffer(MathTrunc(size)); }
  function fromString(s, encoding) {
    const bytes = stringToBytes(s, encodingOf(encoding));
    return new FastBuffer(bytes.buffer, bytes.byteOffset, bytes.length);
  }
  function fromArrayLike(value) {
    const n = value.length > 0 ? MathTrunc(value.length) : 0;
    const out = new FastBuffer(n);
    for (let i = 0; i < n; i++) out[i] = value[i];
    return out;
  }
  function from(value, encodingOrOffset, length) {
    if (typeof value === 'string') return fromString(value, encodingOrOffset);
    if (typeof value === 'object' && value !== null) {
      if (value instanceof ArrayBufferCtor) {
        const offset = encodingOrOffset === undefined ? 0 : MathTrunc(NumberCtor(encodingOrOffset)) || 0;
        if (offset < 0 || offset > value.byteLength) throw codedError(RangeErrorCtor, 'ERR_BUFFER_OUT_OF_BOUNDS', '"offset" is outside of buffer bounds');
        const size = length === undefined ? value.byteLength - offset : MathTrunc(NumberCtor(length)) || 0;
        if (size < 0 || offset + size > value.byteLength) throw codedError(RangeErrorCtor, 'ERR_BUFFER_OUT_OF_BOUNDS', '"length" is outside of buffer bounds');
        return new FastBuffer(value, offset, size);
      }
      if (isView(value)) return value instanceof DataViewCtor ? new FastBuffer(0) : new FastBuffer(value);
      const primitive = typeof value.valueOf === 'function' ? value.valueOf() : value;
      if (primitive !== null && primitive !== undefined && primitive !== value && (typeof primitive === 'string' || typeof primitive === 'object')) return from(primitive, encodingOrOffset, length);
      if (value.type === 'Buffer' && ArrayIsArray(value.data)) return fromArrayLike(value.data);
      if (value.length !== undefined) return typeof value.length === 'number' ? fromArrayLike(value) : new FastBuffer(0);
      if (typeof value[SymbolToPrimitive] === 'function') {
        const s = value[SymbolToPrimitive]('string');
        if (typeof s === 'string') return fromString(s, encodingOrOffset);
      }
    }
    throw codedError(TypeErrorCtor, 'ERR_INVALID_ARG_TYPE', 'The first argument must be of type string or an instance of Buffer, ArrayBuffer, or Array or an Array-like Object. ' + received(value));
  }
  function concat(list, totalLength) {
    if (!ArrayIsArray(list)) throw codedError(TypeErrorCtor, 'ERR_INVALID_ARG_TYPE', 'The "list" argument must be an instance of Array. ' + received(list));
    let total = 0;
    for (let i = 0; i < list.length; i++) {
      checkUint8Array(list[i], 'list[' + i + ']');
      total += list[i].length;
    }
    if (totalLength !== undefined) total = MathTrunc(NumberCtor(totalLength)) || 0;
    const out = new FastBuffer(total > 0 ? total : 0);
    let position = 0;
    for (let i = 0; i < list.length && position < total; i++) {
      const item = list[i];
      const n = item.length < total - position ? item.length : total - position;
      ReflectApply(u8set, out, [plain(item, 0, n), position]);
      position += n;
    }
    return out;
  }
  function compareBytes(a, b) {
    const n = a.length < b.length ? a.length : b.length;
    for (let i = 0; i < n; i++) if (a[i] !== b[i]) return a[i] < b[i] ? -1 : 1;
    return a.length < b.length ? -1 : a.length > b.length ? 1 : 0;
  }
  function fillBytes(buffer, value, offset, end, encoding) {
    if (typeof value === 'number' || typeof value === 'boolean') {
      ReflectApply(u8fill, buffer, [NumberCtor(value) & 255, offset, end]);
      return buffer;
    }
    const bytes = typeof value === 'string' ? stringToBytes(value, encodingOf(encoding)) : toBytes(value);
    if (bytes.length === 0) {
      if (typeof value === 'string' && value !== '') throw codedError(TypeErrorCtor, 'ERR_INVALID_ARG_VALUE', "The argument 'value' is invalid. Received '" + value + "'");
      ReflectApply(u8fill, buffer, [0, offset, end]);
      return buffer;
    }
    for (let i = offset, j = 0; i < end; i++) {
      buffer[i] = bytes[j];
      if (++j === bytes.length) j = 0;
    }
    return buffer;
  }
  function search(buffer, value, byteOffset, encoding) {
    if (typeof byteOffset === 'string') { encoding = byteOffset; byteOffset = 0; }
    const start = relative(byteOffset === undefined ? 0 : byteOffset, buffer.length, 0);
    if (typeof value === 'number') {
      const b = value & 255;
      for (let i = start; i < buffer.length; i++) if (buffer[i] === b) return i;
      return -1;
    }
    const needle = typeof value === 'string' ? stringToBytes(value, encodingOf(encoding)) : value instanceof U8 ? value : null;
    if (needle === null) throw codedError(TypeErrorCtor, 'ERR_INVALID_ARG_TYPE', 'The "value" argument must be one of type number or string or an instance of Buffer or Uint8Array. ' + received(value));
    if (needle.length === 0) return start <= buffer.length ? start : buffer.length;
    outer: for (let i = start; i + needle.length <= buffer.length; i++) {
      for (let j = 0; j < needle.length; j++) if (buffer[i + j] !== needle[j]) continue outer;
      return i;
    }
    return -1;
  }

  const methods = {
    toString(encoding, start, end) {
      const length = this.length;
      const enc = encoding === undefined ? 'utf8' : encodingOf(encoding);
      let s = start === undefined || !(start > 0) ? 0 : MathTrunc(start);
      let e = end === undefined || !(end < length) ? length : MathTrunc(end);
      if (s >= length || e <= s) return '';
      return bytesToString(plain(this, s, e), enc);
    },
    toLocaleString(encoding, start, end) { return ReflectApply(methods.toString, this, [encoding, start, end]); },
    toJSON() {
      const data = [];
      for (let i = 0; i < this.length; i++) data.push(this[i]);
      return { type: 'Buffer', data: data };
    },
    equals(other) {
      checkUint8Array(other, 'otherBuffer');
      return this === other || compareBytes(this, other) === 0;
    },
    compare(target, targetStart, targetEnd, sourceStart, sourceEnd) {
      checkUint8Array(target, 'target');
      const ts = relative(targetStart, target.length, 0), te = relative(targetEnd, target.length, target.length);
      const ss = relative(sourceStart, this.length, 0), se = relative(sourceEnd, this.length, this.length);
      return compareBytes(plain(this, ss, se > ss ? se : ss), plain(target, ts, te > ts ? te : ts));
    },
    slice(start, end) {
      const s = relative(start, this.length, 0), e = relative(end, this.length, this.length);
      return new FastBuffer(this.buffer, this.byteOffset + s, e > s ? e - s : 0);
    },
    subarray(start, end) { return ReflectApply(methods.slice, this, [start, end]); },
    write(string, offset, length, encoding) {
      if (typeof string !== 'string') throw codedError(TypeErrorCtor, 'ERR_INVALID_ARG_TYPE', 'The "string" argument must be of type string. ' + received(string));
      if (typeof offset === 'string') { encoding = offset; offset = undefined; length = undefined; }
      else if (typeof length === 'string') { encoding = length; length = undefined; }
      const at = offset === undefined ? 0 : MathTrunc(NumberCtor(offset)) || 0;
      if (at < 0 || at > this.length) throw codedError(RangeErrorCtor, 'ERR_OUT_OF_RANGE', 'The value of "offset" is out of range. It must be >= 0 && <= ' + this.length + '. Received ' + offset);
      const room = this.length - at;
      const limit = length === undefined ? room : MathMin(room, MathMax(0, MathTrunc(NumberCtor(length)) || 0));
      const enc = encodingOf(encoding);
      const bytes = stringToBytes(string, enc);
      let n = bytes.length < limit ? bytes.length : limit;
      // Like Node, never half a UTF-8 character (or a UTF-16 code unit).
      if (n < bytes.length && enc === 'utf8') while (n > 0 && (bytes[n] & 0xc0) === 0x80) n--;
      if (enc === 'utf16le') n -= n & 1;
      ReflectApply(u8set, this, [plain(bytes, 0, n), at]);
      return n;
    },
    fill(value, offset, end, encoding) {
      if (typeof offset === 'string') { encoding = offset; offset = undefined; end = undefined; }
      else if (typeof end === 'string') { encoding = end; end = undefined; }
      const s = relative(offset === undefined ? 0 : offset, this.length, 0), e = relative(end, this.length, this.length);
      if (e <= s) return this;
      return fillBytes(this, value, s, e, encoding);
    },
    copy(target, targetStart, sourceStart, sourceEnd) {
      checkUint8Array(target, 'target');
      const ts = targetStart === undefined ? 0 : MathMax(0, MathTrunc(NumberCtor(targetStart)) || 0);
      const ss = sourceStart === undefined ? 0 : MathMax(0, MathTrunc(NumberCtor(sourceStart)) || 0);
      const se = sourceEnd === undefined ? this.length : MathMin(this.length, MathMax(0, MathTrunc(NumberCtor(sourceEnd)) || 0));
      if (ts >= target.length || ss >= se) return 0;
      const n = MathMin(se - ss, target.length - ts);
      ReflectApply(u8set, target, [plain(this, ss, ss + n), ts]);
      return n;
    },
    indexOf(value, byteOffset, encoding) { return search(this, value, byteOffset, encoding); },
    includes(value, byteOffset, encoding) { return search(this, value, byteOffset, encoding) !== -1; },
  };
  for (const name of ObjectKeys(methods)) ObjectDefineProperty(proto, name, { value: methods[name], writable: true, configurable: true, enumerable: false });

  const statics = {
    from: from,
    alloc: alloc,
    allocUnsafe: allocUnsafe,
    allocUnsafeSlow: allocUnsafe,
    concat: concat,
    isBuffer: function isBuffer(value) { return value instanceof Buffer; },
    isEncoding: function isEncoding(encoding) { return typeof encoding === 'string' && encoding !== '' && normalizeEncoding(encoding) !== undefined; },
    byteLength: function byteLength(value, encoding) {
      if (typeof value !== 'string') {
        if (isView(value) || value instanceof ArrayBufferCtor) return value.byteLength;
        throw codedError(TypeErrorCtor, 'ERR_INVALID_ARG_TYPE', 'The "string" argument must be of type string or an instance of Buffer or ArrayBuffer. ' + received(value));
      }
      switch (normalizeEncoding(encoding)) {
        case 'hex': return value.length >>> 1;
        case 'base64': case 'base64url': {
          let n = value.length;
          if (n > 0 && value.charCodeAt(n - 1) === 61) n--;
          if (n > 1 && value.charCodeAt(n - 1) === 61) n--;
          return (n * 3) >>> 2;
        }
        case 'latin1': case 'ascii': return value.length;
        case 'utf16le': return value.length * 2;
        default: return utf8Length(value);
      }
    },
    compare: function compare(a, b) {
      checkUint8Array(a, 'buf1');
      checkUint8Array(b, 'buf2');
      return compareBytes(a, b);
    },
  };
  for (const name of ObjectKeys(statics)) ObjectDefineProperty(Buffer, name, { value: statics[name], writable: true, configurable: true, enumerable: true });
  Buffer.poolSize = 8192;
  const bufferModule = ObjectFreeze({ Buffer: Buffer, atob: atobImpl, btoa: btoaImpl, kMaxLength: MAX_LENGTH, constants: ObjectFreeze({ MAX_LENGTH: MAX_LENGTH }) });
  return { Buffer: Buffer, module: bufferModule };
});
