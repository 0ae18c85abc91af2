// Node's `Buffer` and the WHATWG `URL` for reactor code, as plain JavaScript that runs inside the sandbox: public
// reactor examples build Basic-auth headers with `Buffer.from(key + ':').toString('base64')` and endpoints with
// `new URL(path, base)`. Nothing here reaches the host: the source is spliced into the prelude's function
// (src/runtime/prelude.ts) and uses that scope's captured intrinsics and helpers (`once`, `utf8Encode`, `utf8Decode`,
// `toBytes`, `web`, `B64`, `atobImpl`, `btoaImpl`, `paramsChanged`). Both are built on first use, like the other web
// classes, so an invocation that touches neither pays only for two property definitions.
//
// Buffer: a Uint8Array subclass (as in Node) with from/alloc/allocUnsafe/concat/isBuffer/isEncoding/byteLength/compare,
// and toString/write/fill/copy/equals/compare/indexOf/includes/slice/subarray/toJSON on instances; encodings utf8,
// hex, base64, base64url, latin1 (binary), ascii, utf16le (ucs2). Decoding is as lenient as Node's.
// URL: the WHATWG basic URL parser for special (http, https, ws, wss, ftp, file) and other schemes, relative
// resolution, IPv4/IPv6 hosts, punycode for non-ASCII host names (lower-cased and NFKC-normalized rather than the full
// UTS #46 table), the setters, a `searchParams` kept in step with `search`, `URL.canParse` and `URL.parse`.

export const NODE_COMPAT_SOURCE = String.raw`
// ---------------------------------------------------------------------------------------------- Buffer
const nodeBuffer = once(function () {
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
          const c = s.charCodeAt(i);
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
  function Buffer(arg, encodingOrOffset, length) {
    if (typeof arg === 'number') {
      if (typeof encodingOrOffset === 'string') throw codedError(TypeErrorCtor, 'ERR_INVALID_ARG_TYPE', 'The "string" argument must be of type string. ' + received(arg));
      return alloc(arg);
    }
    return from(arg, encodingOrOffset, length);
  }
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

// ---------------------------------------------------------------------------------------------- URL (WHATWG)
const nodeURL = once(function () {
  const URLSearchParams = web().URLSearchParams;
  const records = new WeakMapCtor();
  const paramsOwners = new WeakMapCtor();
  const weakGet = WeakMapCtor.prototype.get;
  const weakSet = WeakMapCtor.prototype.set;
  const SCHEME = /^[A-Za-z][A-Za-z0-9+.\-]*$/;
  // The percent-encode sets beyond the C0 control set (which every set includes, with everything above '~').
  const FRAGMENT_SET = ' "<>\x60';
  const QUERY_SET = ' "#<>';
  const SPECIAL_QUERY_SET = ' "#<>\'';
  const PATH_SET = ' "#<>?\x60{}';
  const USERINFO_SET = ' "#<>?\x60{}/:;=@[\\]^|';
  const HEX = '0123456789ABCDEF';

  function defaultPort(scheme) {
    switch (scheme) {
      case 'http': case 'ws': return 80;
      case 'https': case 'wss': return 443;
      case 'ftp': return 21;
      case 'file': return null;
      default: return undefined;
    }
  }
  function isSpecial(scheme) { return defaultPort(scheme) !== undefined; }
  function encode(s, set) {
    let i = 0;
    for (; i < s.length; i++) {
      const c = s.charCodeAt(i);
      if (c < 0x20 || c > 0x7e || set.indexOf(s[i]) >= 0) break;
    }
    if (i === s.length) return s;
    const bytes = utf8Encode(s);
    let out = '';
    for (let j = 0; j < bytes.length; j++) {
      const b = bytes[j];
      if (b < 0x20 || b > 0x7e || set.indexOf(fromCharCode(b)) >= 0) out += '%' + HEX[b >> 4] + HEX[b & 15];
      else out += fromCharCode(b);
    }
    return out;
  }
  function firstOf(s, chars, from) {
    for (let i = from || 0; i < s.length; i++) if (chars.indexOf(s[i]) >= 0) return i;
    return s.length;
  }
  function removeTabs(s) { return s.replace(/[\t\n\r]/g, ''); }
  function isDoubleDot(s) { return s === '..' || (s.length > 2 && s.length <= 6 && /^(?:\.|%2e)(?:\.|%2e)$/i.test(s)); }
  function isSingleDot(s) { return s === '.' || s === '%2e' || s === '%2E'; }
  function isDriveLetter(s, normalizedOnly) { return s.length === 2 && /[A-Za-z]/.test(s[0]) && (s[1] === ':' || (!normalizedOnly && s[1] === '|')); }
  function startsWithDriveLetter(s) {
    return s.length >= 2 && isDriveLetter(s.slice(0, 2), false) && (s.length === 2 || '/\\?#'.indexOf(s[2]) >= 0);
  }
  function shorten(url) {
    if (url.scheme === 'file' && url.path.length === 1 && isDriveLetter(url.path[0], true)) return;
    url.path.pop();
  }

  // ------------------------------------------------------------------ hosts
  function percentDecode(s) {
    const bytes = utf8Encode(s);
    const out = [];
    for (let i = 0; i < bytes.length; i++) {
      const b = bytes[i];
      if (b === 37 && i + 2 < bytes.length) {
        const hi = hexDigit(bytes[i + 1]), lo = hexDigit(bytes[i + 2]);
        if (hi >= 0 && lo >= 0) { out.push(hi * 16 + lo); i += 2; continue; }
      }
      out.push(b);
    }
    return new Uint8ArrayCtor(out);
  }
  function punycode(label) {
    const input = [];
    for (const ch of label) input.push(ch.codePointAt(0));
    let out = '';
    for (const c of input) if (c < 0x80) out += fromCharCode(c);
    const basic = out.length;
    let handled = basic;
    if (basic > 0) out += '-';
    let n = 128, delta = 0, bias = 72;
    const digit = function (d) { return fromCharCode(d < 26 ? d + 97 : d + 22); };
    const adapt = function (d, count, first) {
      d = first ? MathTrunc(d / 700) : d >> 1;
      d += MathTrunc(d / count);
      let k = 0;
      while (d > 455) { d = MathTrunc(d / 35); k += 36; }
      return k + MathTrunc((36 * d) / (d + 38));
    };
    while (handled < input.length) {
      let m = 0x7fffffff;
      for (const c of input) if (c >= n && c < m) m = c;
      delta += (m - n) * (handled + 1);
      n = m;
      for (const c of input) {
        if (c < n) delta++;
        if (c === n) {
          let q = delta;
          for (let k = 36; ; k += 36) {
            const t = k <= bias ? 1 : k >= bias + 26 ? 26 : k - bias;
            if (q < t) break;
            out += digit(t + ((q - t) % (36 - t)));
            q = MathTrunc((q - t) / (36 - t));
          }
          out += digit(q);
          bias = adapt(delta, handled + 1, handled === basic);
          delta = 0;
          handled++;
        }
      }
      delta++;
      n++;
    }
    return out;
  }
  function domainToASCII(domain) {
    if (/^[\x00-\x7f]*$/.test(domain)) return domain.toLowerCase();
    const mapped = domain.normalize('NFKC').toLowerCase().replace(/[\u3002\uff0e\uff61]/g, '.').replace(/[\u00ad\u200b\u200c\u200d\u2060\ufeff]/g, '');
    return mapped.split('.').map(function (label) { return /[^\x00-\x7f]/.test(label) ? 'xn--' + punycode(label) : label; }).join('.');
  }
  function ipv4Number(s) {
    if (s === '') return NaN;
    let radix = 10;
    if (s.length >= 2 && s[0] === '0' && (s[1] === 'x' || s[1] === 'X')) { s = s.slice(2); radix = 16; }
    else if (s.length >= 2 && s[0] === '0') { s = s.slice(1); radix = 8; }
    if (s === '') return 0;
    if (!(radix === 10 ? /^[0-9]+$/ : radix === 16 ? /^[0-9A-Fa-f]+$/ : /^[0-7]+$/).test(s)) return NaN;
    return NumberCtor.parseInt(s, radix);
  }
  function endsInNumber(s) {
    const parts = s.split('.');
    if (parts[parts.length - 1] === '') { if (parts.length === 1) return false; parts.pop(); }
    const last = parts[parts.length - 1];
    if (last !== '' && /^[0-9]+$/.test(last)) return true;
    return ipv4Number(last) === ipv4Number(last);
  }
  function parseIPv4(s) {
    const parts = s.split('.');
    if (parts[parts.length - 1] === '' && parts.length > 1) parts.pop();
    if (parts.length > 4) return null;
    const numbers = [];
    for (const part of parts) {
      const n = ipv4Number(part);
      if (n !== n) return null;
      numbers.push(n);
    }
    for (let i = 0; i < numbers.length - 1; i++) if (numbers[i] > 255) return null;
    if (numbers[numbers.length - 1] >= MathPow(256, 5 - numbers.length)) return null;
    let address = numbers[numbers.length - 1];
    for (let i = 0; i < numbers.length - 1; i++) address += numbers[i] * MathPow(256, 3 - i);
    const octets = [];
    for (let i = 3; i >= 0; i--) octets.push(MathTrunc(address / MathPow(256, i)) % 256);
    return octets.join('.');
  }
  function parseIPv6(s) {
    const pieces = [0, 0, 0, 0, 0, 0, 0, 0];
    let index = 0, compress = null, p = 0;
    const hex = function (i) { return i < s.length ? hexDigit(s.charCodeAt(i)) : -1; };
    if (s[0] === ':') {
      if (s[1] !== ':') return null;
      p = 2;
      compress = ++index;
    }
    while (p < s.length) {
      if (index === 8) return null;
      if (s[p] === ':') {
        if (compress !== null) return null;
        p++;
        compress = ++index;
        continue;
      }
      let value = 0, length = 0;
      while (length < 4 && hex(p) >= 0) { value = value * 16 + hex(p); p++; length++; }
      if (s[p] === '.') {
        if (length === 0) return null;
        p -= length;
        if (index > 6) return null;
        let seen = 0;
        while (p < s.length) {
          let octet = null;
          if (seen > 0) { if (s[p] === '.' && seen < 4) p++; else return null; }
          if (!(s[p] >= '0' && s[p] <= '9')) return null;
          while (s[p] >= '0' && s[p] <= '9') {
            const d = s.charCodeAt(p) - 48;
            if (octet === null) octet = d; else if (octet === 0) return null; else octet = octet * 10 + d;
            if (octet > 255) return null;
            p++;
          }
          pieces[index] = pieces[index] * 256 + octet;
          seen++;
          if (seen === 2 || seen === 4) index++;
        }
        if (seen !== 4) return null;
        break;
      } else if (s[p] === ':') {
        p++;
        if (p >= s.length) return null;
      } else if (p < s.length) return null;
      pieces[index++] = value;
    }
    if (compress !== null) {
      let swaps = index - compress;
      index = 7;
      while (index !== 0 && swaps > 0) {
        const t = pieces[compress + swaps - 1];
        pieces[compress + swaps - 1] = pieces[index];
        pieces[index] = t;
        index--;
        swaps--;
      }
    } else if (index !== 8) return null;
    // Serialize: the first longest run of two or more zero pieces becomes '::'.
    let bestStart = -1, bestLength = 1;
    for (let i = 0; i < 8; ) {
      if (pieces[i] !== 0) { i++; continue; }
      let j = i;
      while (j < 8 && pieces[j] === 0) j++;
      if (j - i > bestLength) { bestStart = i; bestLength = j - i; }
      i = j;
    }
    let out = '';
    for (let i = 0; i < 8; i++) {
      if (i === bestStart) { out += i === 0 ? '::' : ':'; i += bestLength - 1; continue; }
      out += pieces[i].toString(16);
      if (i < 7) out += ':';
    }
    return out;
  }
  /** The host parser: null on failure, else the serialized host. */
  function parseHost(input, opaque) {
    if (input[0] === '[') {
      if (input[input.length - 1] !== ']') return null;
      const address = parseIPv6(input.slice(1, -1));
      return address === null ? null : '[' + address + ']';
    }
    if (opaque) return /[\x00\t\n\r #/:<>?@[\\\]^|]/.test(input) ? null : encode(input, '');
    const ascii = domainToASCII(utf8Decode(percentDecode(input)));
    if (ascii === '' || /[\x00-\x20#%/:<>?@[\\\]^|\x7f]/.test(ascii)) return null;
    return endsInNumber(ascii) ? parseIPv4(ascii) : ascii;
  }

  // ------------------------------------------------------------------ the parser
  function record(scheme) {
    return { scheme: scheme, username: '', password: '', host: null, port: null, path: [], opaque: false, query: null, fragment: null };
  }
  function queryAndFragment(url, s) {
    if (s[0] === '?') {
      const hash = s.indexOf('#');
      url.query = encode(hash < 0 ? s.slice(1) : s.slice(1, hash), isSpecial(url.scheme) ? SPECIAL_QUERY_SET : QUERY_SET);
      s = hash < 0 ? '' : s.slice(hash);
    }
    if (s[0] === '#') url.fragment = encode(s.slice(1), FRAGMENT_SET);
    return url;
  }
  /** The path state, from the first segment on; with override (the pathname setter), '?' and '#' are path. */
  function pathState(url, s, override) {
    const special = isSpecial(url.scheme);
    const end = override ? s.length : firstOf(s, '?#');
    const segments = s.slice(0, end).split(special ? /[\/\\]/ : '/');
    for (let i = 0; i < segments.length; i++) {
      const segment = segments[i];
      const last = i === segments.length - 1;
      if (isDoubleDot(segment)) {
        shorten(url);
        if (last) url.path.push('');
      } else if (isSingleDot(segment)) {
        if (last) url.path.push('');
      } else {
        let encoded = encode(segment, PATH_SET);
        if (url.scheme === 'file' && url.path.length === 0 && isDriveLetter(encoded, false)) {
          if (url.host !== '' && url.host !== null) url.host = '';
          encoded = encoded[0] + ':';
        }
        url.path.push(encoded);
      }
    }
    return override ? url : queryAndFragment(url, s.slice(end));
  }
  function pathStart(url, s) {
    if (isSpecial(url.scheme)) return pathState(url, s[0] === '/' || s[0] === '\\' ? s.slice(1) : s);
    if (s[0] === '/') return pathState(url, s.slice(1));
    return queryAndFragment(url, s);
  }
  function stripSlashes(s) {
    let i = 0;
    while (s[i] === '/' || s[i] === '\\') i++;
    return s.slice(i);
  }
  function parsePort(url, digits) {
    if (digits === '') return true;
    if (!/^[0-9]+$/.test(digits)) return false;
    const port = NumberCtor.parseInt(digits, 10);
    if (port > 65535) return false;
    url.port = port === defaultPort(url.scheme) ? null : port;
    return true;
  }
  function hostPortSplit(s) {
    let brackets = false;
    for (let i = 0; i < s.length; i++) {
      if (s[i] === '[') brackets = true;
      else if (s[i] === ']') brackets = false;
      else if (s[i] === ':' && !brackets) return i;
    }
    return -1;
  }
  function authorityState(url, s) {
    const special = isSpecial(url.scheme);
    const end = firstOf(s, special ? '/?#\\' : '/?#');
    let authority = s.slice(0, end);
    const at = authority.lastIndexOf('@');
    if (at >= 0) {
      const info = authority.slice(0, at);
      const colon = info.indexOf(':');
      url.username = encode(colon < 0 ? info : info.slice(0, colon), USERINFO_SET);
      url.password = colon < 0 ? '' : encode(info.slice(colon + 1), USERINFO_SET);
      authority = authority.slice(at + 1);
      if (authority === '') return null;
    }
    const colon = hostPortSplit(authority);
    const hostText = colon < 0 ? authority : authority.slice(0, colon);
    if (hostText === '' && (special || colon >= 0)) return null;
    const host = hostText === '' ? '' : parseHost(hostText, !special);
    if (host === null) return null;
    url.host = host;
    if (colon >= 0 && !parsePort(url, authority.slice(colon + 1))) return null;
    return pathStart(url, s.slice(end));
  }
  function copyAuthority(url, base) {
    url.username = base.username;
    url.password = base.password;
    url.host = base.host;
    url.port = base.port;
  }
  function relativeState(url, s, base) {
    const special = isSpecial(url.scheme);
    const c = s[0];
    if (c === '/' || (special && c === '\\')) {
      const d = s[1];
      if (special && (d === '/' || d === '\\')) return authorityState(url, stripSlashes(s));
      if (!special && d === '/') return authorityState(url, s.slice(2));
      copyAuthority(url, base);
      return pathState(url, s.slice(1));
    }
    copyAuthority(url, base);
    url.path = base.path.slice();
    url.query = base.query;
    if (s === '' || c === '#') return queryAndFragment(url, s);
    url.query = null;
    if (c === '?') return queryAndFragment(url, s);
    shorten(url);
    return pathState(url, s);
  }
  function fileHost(url, s) {
    const end = firstOf(s, '/\\?#');
    const text = s.slice(0, end);
    if (isDriveLetter(text, false)) return pathState(url, s);
    if (text === '') url.host = '';
    else {
      const host = parseHost(text, false);
      if (host === null) return null;
      url.host = host === 'localhost' ? '' : host;
    }
    return pathStart(url, s.slice(end));
  }
  function fileState(url, s, base) {
    url.host = '';
    if (s[0] === '/' || s[0] === '\\') {
      if (s[1] === '/' || s[1] === '\\') return fileHost(url, s.slice(2));
      if (base !== null) {
        url.host = base.host;
        if (!startsWithDriveLetter(s.slice(1)) && base.path.length > 0 && isDriveLetter(base.path[0], true)) url.path.push(base.path[0]);
      }
      return pathState(url, s.slice(1));
    }
    if (base !== null) {
      url.host = base.host;
      url.path = base.path.slice();
      url.query = base.query;
      if (s === '' || s[0] === '#') return queryAndFragment(url, s);
      url.query = null;
      if (s[0] === '?') return queryAndFragment(url, s);
      if (!startsWithDriveLetter(s)) shorten(url);
      else url.path = [];
    }
    return pathState(url, s);
  }
  /** The basic URL parser (without state override): a record, or null on failure. */
  function parse(input, base) {
    const s = removeTabs(StringCtor(input).replace(/^[\x00-\x20]+|[\x00-\x20]+$/g, ''));
    const colon = s.indexOf(':');
    const scheme = colon > 0 ? s.slice(0, colon) : '';
    if (scheme === '' || !SCHEME.test(scheme)) {
      if (base === null) return null;
      if (base.opaque) {
        if (s[0] !== '#') return null;
        const url = record(base.scheme);
        url.opaque = true;
        url.path = base.path;
        url.query = base.query;
        return queryAndFragment(url, s);
      }
      const url = record(base.scheme);
      return base.scheme === 'file' ? fileState(url, s, base) : relativeState(url, s, base);
    }
    const url = record(scheme.toLowerCase());
    const rest = s.slice(colon + 1);
    if (url.scheme === 'file') return fileState(url, rest, base !== null && base.scheme === 'file' ? base : null);
    if (isSpecial(url.scheme)) {
      if (base !== null && base.scheme === url.scheme && !(rest[0] === '/' && rest[1] === '/')) return relativeState(url, rest, base);
      return authorityState(url, stripSlashes(rest));
    }
    if (rest[0] === '/') return rest[1] === '/' ? authorityState(url, rest.slice(2)) : pathState(url, rest.slice(1));
    const end = firstOf(rest, '?#');
    url.opaque = true;
    url.path = encode(rest.slice(0, end), '');
    return queryAndFragment(url, rest.slice(end));
  }
  function pathname(url) { return url.opaque ? url.path : url.path.length === 0 ? '' : '/' + url.path.join('/'); }
  function serialize(url) {
    let out = url.scheme + ':';
    if (url.host !== null) {
      out += '//';
      if (url.username !== '' || url.password !== '') out += url.username + (url.password !== '' ? ':' + url.password : '') + '@';
      out += url.host + (url.port !== null ? ':' + url.port : '');
    } else if (!url.opaque && url.path.length > 1 && url.path[0] === '') out += '/.';
    out += pathname(url);
    if (url.query !== null) out += '?' + url.query;
    if (url.fragment !== null) out += '#' + url.fragment;
    return out;
  }
  function origin(url) {
    switch (url.scheme) {
      case 'blob': {
        const inner = url.opaque ? parse(url.path, null) : null;
        return inner !== null && (inner.scheme === 'http' || inner.scheme === 'https') ? origin(inner) : 'null';
      }
      case 'ftp': case 'http': case 'https': case 'ws': case 'wss':
        return url.scheme + '://' + url.host + (url.port !== null ? ':' + url.port : '');
      default:
        return 'null';
    }
  }

  // ------------------------------------------------------------------ the class
  function invalid(input, base) {
    const error = new TypeErrorCtor('Invalid URL');
    error.code = 'ERR_INVALID_URL';
    error.input = input;
    if (base !== undefined) error.base = base;
    return error;
  }
  function recordOf(self) {
    const url = self !== null && typeof self === 'object' ? ReflectApply(weakGet, records, [self]) : undefined;
    if (url === undefined) throw new TypeErrorCtor('Value of "this" must be of type URL');
    return url;
  }
  // The query as is: the constructor drops one leading '?', which belongs to the query here ('??a' is name '?a').
  function paramsOf(url) { return new URLSearchParams(url.query === null ? '' : '?' + url.query); }
  function refreshParams(url) {
    if (url.params !== null) url.params._list = paramsOf(url)._list;
  }
  // Called by URLSearchParams after each change (prelude.ts): a URL's searchParams write through to its query.
  paramsChanged = function (params) {
    const url = ReflectApply(weakGet, paramsOwners, [params]);
    if (url === undefined) return;
    const query = params.toString();
    url.query = query === '' ? null : query;
  };
  function canHaveCredentials(url) { return url.host !== null && url.host !== '' && url.scheme !== 'file'; }
  function setHost(url, value, hostnameOnly) {
    if (url.opaque) return;
    const special = isSpecial(url.scheme);
    const s = removeTabs(StringCtor(value));
    const text = s.slice(0, firstOf(s, special ? '/?#\\' : '/?#'));
    const colon = hostPortSplit(text);
    if (colon >= 0 && hostnameOnly) return;
    const hostText = colon < 0 ? text : text.slice(0, colon);
    if (url.scheme === 'file') {
      if (colon >= 0 || isDriveLetter(hostText, false)) return;
      const host = hostText === '' ? '' : parseHost(hostText, false);
      if (host !== null) url.host = host === 'localhost' ? '' : host;
      return;
    }
    if (hostText === '' && (special || colon >= 0 || url.username !== '' || url.password !== '' || url.port !== null)) return;
    const host = hostText === '' ? '' : parseHost(hostText, !special);
    if (host === null) return;
    url.host = host;
    if (colon >= 0) parsePort(url, /^[0-9]*/.exec(text.slice(colon + 1))[0]);
  }

  class URL {
    constructor(input, base) {
      if (arguments.length === 0) throw codedURLError('ERR_MISSING_ARGS', 'The "url" argument must be specified');
      const text = StringCtor(input);
      let baseRecord = null;
      if (base !== undefined) {
        baseRecord = parse(StringCtor(base), null);
        if (baseRecord === null) throw invalid(text, StringCtor(base));
      }
      const url = parse(text, baseRecord);
      if (url === null) throw invalid(text, base === undefined ? undefined : StringCtor(base));
      url.params = null;
      ReflectApply(weakSet, records, [this, url]);
    }
    static canParse(input, base) {
      let baseRecord = null;
      if (base !== undefined) {
        baseRecord = parse(StringCtor(base), null);
        if (baseRecord === null) return false;
      }
      return parse(StringCtor(input), baseRecord) !== null;
    }
    static parse(input, base) {
      try { return base === undefined ? new URL(input) : new URL(input, base); } catch (error) { return null; }
    }
    get href() { return serialize(recordOf(this)); }
    set href(value) {
      const url = recordOf(this);
      const next = parse(StringCtor(value), null);
      if (next === null) throw invalid(StringCtor(value));
      for (const key of ['scheme', 'username', 'password', 'host', 'port', 'path', 'opaque', 'query', 'fragment']) url[key] = next[key];
      refreshParams(url);
    }
    get origin() { return origin(recordOf(this)); }
    get protocol() { return recordOf(this).scheme + ':'; }
    set protocol(value) {
      const url = recordOf(this);
      const s = removeTabs(StringCtor(value));
      const colon = s.indexOf(':');
      const scheme = colon < 0 ? s : s.slice(0, colon);
      if (!SCHEME.test(scheme)) return;
      const next = scheme.toLowerCase();
      if (isSpecial(next) !== isSpecial(url.scheme)) return;
      if (next === 'file' && (url.username !== '' || url.password !== '' || url.port !== null)) return;
      if (url.scheme === 'file' && url.host === '') return;
      url.scheme = next;
      if (url.port === defaultPort(next)) url.port = null;
    }
    get username() { return recordOf(this).username; }
    set username(value) { const url = recordOf(this); if (canHaveCredentials(url)) url.username = encode(StringCtor(value), USERINFO_SET); }
    get password() { return recordOf(this).password; }
    set password(value) { const url = recordOf(this); if (canHaveCredentials(url)) url.password = encode(StringCtor(value), USERINFO_SET); }
    get host() {
      const url = recordOf(this);
      return url.host === null ? '' : url.port === null ? url.host : url.host + ':' + url.port;
    }
    set host(value) { setHost(recordOf(this), value, false); }
    get hostname() { const host = recordOf(this).host; return host === null ? '' : host; }
    set hostname(value) { setHost(recordOf(this), value, true); }
    get port() { const port = recordOf(this).port; return port === null ? '' : StringCtor(port); }
    set port(value) {
      const url = recordOf(this);
      if (!canHaveCredentials(url)) return;
      const s = removeTabs(StringCtor(value));
      if (s === '') { url.port = null; return; }
      parsePort(url, /^[0-9]*/.exec(s)[0]);
    }
    get pathname() { return pathname(recordOf(this)); }
    set pathname(value) {
      const url = recordOf(this);
      if (url.opaque) return;
      const s = removeTabs(StringCtor(value));
      url.path = [];
      if (isSpecial(url.scheme)) pathState(url, s[0] === '/' || s[0] === '\\' ? s.slice(1) : s, true);
      else if (s !== '') pathState(url, s[0] === '/' ? s.slice(1) : s, true);
      else if (url.host === null) url.path.push('');
    }
    get search() { const query = recordOf(this).query; return query === null || query === '' ? '' : '?' + query; }
    set search(value) {
      const url = recordOf(this);
      const s = removeTabs(StringCtor(value));
      if (s === '') url.query = null;
      else url.query = encode(s[0] === '?' ? s.slice(1) : s, isSpecial(url.scheme) ? SPECIAL_QUERY_SET : QUERY_SET);
      refreshParams(url);
    }
    get searchParams() {
      const url = recordOf(this);
      if (url.params === null) {
        url.params = paramsOf(url);
        ReflectApply(weakSet, paramsOwners, [url.params, url]);
      }
      return url.params;
    }
    get hash() { const fragment = recordOf(this).fragment; return fragment === null || fragment === '' ? '' : '#' + fragment; }
    set hash(value) {
      const url = recordOf(this);
      const s = removeTabs(StringCtor(value));
      url.fragment = s === '' ? null : encode(s[0] === '#' ? s.slice(1) : s, FRAGMENT_SET);
    }
    toString() { return serialize(recordOf(this)); }
    toJSON() { return serialize(recordOf(this)); }
  }
  function codedURLError(code, message) {
    const error = new TypeErrorCtor(message);
    error.code = code;
    return error;
  }
  for (const name of ['href', 'origin', 'protocol', 'username', 'password', 'host', 'hostname', 'port', 'pathname', 'search', 'searchParams', 'hash', 'toString', 'toJSON']) {
    const descriptor = ObjectGetOwnPropertyDescriptor(URL.prototype, name);
    descriptor.enumerable = true;
    ObjectDefineProperty(URL.prototype, name, descriptor);
  }
  ObjectDefineProperty(URL.prototype, SymbolToStringTag, { value: 'URL', configurable: true });
  return { URL: URL, isURL: function (value) { return value !== null && typeof value === 'object' && ReflectApply(weakGet, records, [value]) !== undefined; } };
});
`;
