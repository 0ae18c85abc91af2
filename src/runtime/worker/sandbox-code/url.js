// @ts-check
/* eslint-disable no-control-regex -- the URL standard's code point sets (C0 controls, forbidden host code points) include U+0000-U+001F */
// The WHATWG `URL` ('url' and the global) as plain JavaScript: public reactor examples build endpoints with
// `new URL(path, base)`. The basic URL parser for special (http, https, ws, wss, ftp, file) and other schemes, relative
// resolution, IPv4/IPv6 hosts, punycode for non-ASCII host names (lower-cased and NFKC-normalized rather than the full
// UTS #46 table), the setters, a `searchParams` kept in step with `search`, `URL.canParse` and `URL.parse`. Built on
// first use. test/unit/sandbox-shims.test.ts compares it with Node's own.
import { hexDigit, utf8Decode, utf8Encode } from './bytes.js';
import { fromCharCode, MathPow, MathTrunc, NumberCtor, ObjectDefineProperty, ObjectGetOwnPropertyDescriptor, once, ReflectApply, StringCtor, SymbolToStringTag, TypeErrorCtor, Uint8ArrayCtor, WeakMapCtor } from './intrinsics.js';
import { onParamsChanged, urlSearchParams } from './url-search-params.js';

export const nodeURL = once(function () {
  const URLSearchParams = urlSearchParams();
  const records = new WeakMapCtor();
  const paramsOwners = new WeakMapCtor();
  const weakGet = WeakMapCtor.prototype.get;
  const weakSet = WeakMapCtor.prototype.set;
  const SCHEME = /^[A-Za-z][A-Za-z0-9+.-]*$/;
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
    const mapped = domain.normalize('NFKC').toLowerCase().replace(/[\u3002\uff0e\uff61]/g, '.').replace(/\u00ad|\u200b|\u200c|\u200d|\u2060|\ufeff/g, '');
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
          /** @type {any} */
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
    const segments = s.slice(0, end).split(special ? /[/\\]/ : '/');
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
    const error = /** @type {any} */ (new TypeErrorCtor('Invalid URL'));
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
  // Called by URLSearchParams after each change: a URL's searchParams write through to its query.
  onParamsChanged(function (params) {
    const url = ReflectApply(weakGet, paramsOwners, [params]);
    if (url === undefined) return;
    const query = params.toString();
    url.query = query === '' ? null : query;
  });
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
    if (colon >= 0) parsePort(url, /** @type {RegExpExecArray} */ (/^[0-9]*/.exec(text.slice(colon + 1)))[0]);
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
      try { return base === undefined ? new URL(input) : new URL(input, base); } catch { return null; }
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
      parsePort(url, /** @type {RegExpExecArray} */ (/^[0-9]*/.exec(s))[0]);
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
    const error = /** @type {any} */ (new TypeErrorCtor(message));
    error.code = code;
    return error;
  }
  for (const name of ['href', 'origin', 'protocol', 'username', 'password', 'host', 'hostname', 'port', 'pathname', 'search', 'searchParams', 'hash', 'toString', 'toJSON']) {
    const descriptor = /** @type {PropertyDescriptor} */ (ObjectGetOwnPropertyDescriptor(URL.prototype, name));
    descriptor.enumerable = true;
    ObjectDefineProperty(URL.prototype, name, descriptor);
  }
  ObjectDefineProperty(URL.prototype, SymbolToStringTag, { value: 'URL', configurable: true });
  return { URL: URL, isURL: function (value) { return value !== null && typeof value === 'object' && ReflectApply(weakGet, records, [value]) !== undefined; } };
});
