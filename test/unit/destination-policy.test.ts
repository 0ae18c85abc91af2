import { afterAll, describe, expect, test } from '@jest/globals';
import { Errors, VaultError } from '../../src/errors/registry.js';
import { embeddedIPv4, isDnsHostName, isIpLiteral } from '../../src/proxy/addresses.js';
import {
  classifyAddress,
  DestinationPolicy,
  toUpstreamError,
  type AddressClass,
} from '../../src/proxy/destination-policy.js';

const policy = new DestinationPolicy({ allowedHosts: ['Internal.Example.', '127.0.0.1', 'localhost'] });
afterAll(() => policy.close());

function refusal(url: string): VaultError {
  try {
    policy.checkUrl(url);
  } catch (error) {
    expect(error).toBeInstanceOf(Errors.DestinationRefused);
    return error as VaultError;
  }
  throw new Error(`${url} was accepted`);
}

describe('checkUrl', () => {
  test.each([
    ['http://example.com/', /https/],
    ['ftp://example.com/file', /https/],
    ['ws://example.com/', /https/],
    ['wss://example.com/', /https/],
    ['file:///etc/passwd', /https/],
    ['gopher://example.com:70/', /https/],
    ['data:text/plain,hello', /https/],
    ['javascript:alert(1)', /https/],
    ['//example.com/', /valid absolute URL/],
    ['not a url', /valid absolute URL/],
    ['https://', /valid absolute URL/],
    ['https://user:pass@example.com/', /user name or password/],
    ['https://user@example.com/', /user name or password/],
    ['https://example.com@127.0.0.1/', /user name or password/], // the host is 127.0.0.1
    ['https://example.com:443@127.0.0.1/', /user name or password/],
    ['https://example.com:0/', /port/],
    ['https://example.com:65536/', /valid absolute URL/],
    ['https://exa mple.com/', /valid absolute URL/],
  ])('refuses %s', (url, reason) => {
    const error = refusal(url);
    expect(error.status).toBe(400);
    expect(error.code).toBe('TV_DESTINATION_REFUSED');
    expect(error.detail).toMatch(reason);
  });

  test.each([
    'https://127.0.0.1/',
    'https://127.0.0.1./',
    'https://2130706433/',
    'https://0x7f000001/',
    'https://0x7f.0x0.0x0.0x1/',
    'https://0177.0.0.1/',
    'https://017700000001/',
    'https://127.1/',
    'https://127.0.1/',
    'https://0/',
    'https://127.0.0.%31/',
    'https://\uff11\uff12\uff17\uff0e\uff10\uff0e\uff10\uff0e\uff11/', // full-width digits
    'https://[::1]/',
    'https://[::]/',
    'https://[0:0:0:0:0:0:0:1]/',
    'https://[::ffff:127.0.0.1]/',
    'https://[::ffff:7f00:1]/',
    'https://[0:0:0:0:0:ffff:7f00:1]/',
    'https://[fe80::1]/',
    'https://[fd00:ec2::254]/',
    'https://169.254.169.254/latest/meta-data/',
    'https://2852039166/', // 169.254.169.254 in decimal
    'https://8.8.8.8/', // public, but still an IP literal
    'https://127.0.0.1#@example.com',
    'https://127.0.0.1?@example.com',
    'https://127.0.0.1:8443/',
  ])('refuses the IP literal %s', (url) => {
    expect(refusal(url).detail).toBe('The destination host must be a DNS name, not an IP address.');
  });

  test('an allow-listed IP literal is still refused', () => {
    expect(refusal('https://127.0.0.1/').code).toBe('TV_DESTINATION_REFUSED');
    expect(policy.isAllowedHost('127.0.0.1')).toBe(false);
  });

  test.each([
    ['https://example.com', 'example.com', ''],
    ['https://EXAMPLE.com:8443/a/b?c=d#frag', 'example.com', '8443'],
    ['https://api.stripe.com/v1/tokens', 'api.stripe.com', ''],
    ['https://example.com./', 'example.com.', ''],
    ['https://bücher.example/', 'xn--bcher-kva.example', ''],
    ['https://under_score.example.com/', 'under_score.example.com', ''],
    ['https://localhost:443/', 'localhost', ''],
    ['https://example.com\\@127.0.0.1/', 'example.com', ''], // the backslash is a path separator in https URLs
  ])('accepts %s', (url, hostname, port) => {
    const checked = policy.checkUrl(url);
    expect(checked.hostname).toBe(hostname);
    expect(checked.port).toBe(port);
    expect(checked.hash).toBe('');
  });

  test('accepts URL objects and does not change them', () => {
    const url = new URL('https://example.com/x#y');
    expect(policy.checkUrl(url).href).toBe('https://example.com/x');
    expect(url.hash).toBe('#y');
  });
});

describe('address classification', () => {
  const table: Array<[string, AddressClass]> = [
    ['0.0.0.0', 'unspecified'],
    ['0.1.2.3', 'unspecified'],
    ['10.0.0.1', 'private'],
    ['10.255.255.255', 'private'],
    ['100.63.255.255', 'public'],
    ['100.64.0.1', 'cgnat'],
    ['100.127.255.255', 'cgnat'],
    ['100.128.0.0', 'public'],
    ['100.100.100.200', 'metadata'],
    ['127.0.0.1', 'loopback'],
    ['127.255.255.254', 'loopback'],
    ['169.254.0.1', 'link-local'],
    ['169.254.169.254', 'metadata'],
    ['169.254.170.2', 'metadata'],
    ['168.63.129.16', 'metadata'],
    ['172.15.255.255', 'public'],
    ['172.16.0.1', 'private'],
    ['172.31.255.255', 'private'],
    ['172.32.0.0', 'public'],
    ['192.0.0.1', 'reserved'],
    ['192.0.0.192', 'metadata'],
    ['192.0.2.1', 'reserved'],
    ['192.88.99.1', 'reserved'],
    ['192.168.0.1', 'private'],
    ['198.18.0.1', 'reserved'],
    ['198.19.255.255', 'reserved'],
    ['198.20.0.0', 'public'],
    ['198.51.100.7', 'reserved'],
    ['203.0.113.9', 'reserved'],
    ['224.0.0.1', 'multicast'],
    ['239.255.255.250', 'multicast'],
    ['240.0.0.1', 'reserved'],
    ['255.255.255.255', 'broadcast'],
    ['8.8.8.8', 'public'],
    ['93.184.216.34', 'public'],
    ['::', 'unspecified'],
    ['::1', 'loopback'],
    ['0:0:0:0:0:0:0:1', 'loopback'],
    ['::127.0.0.1', 'reserved'], // IPv4-compatible
    ['::ffff:127.0.0.1', 'loopback'],
    ['::ffff:7f00:1', 'loopback'],
    ['::FFFF:A9FE:A9FE', 'metadata'],
    ['::ffff:10.1.2.3', 'private'],
    ['::ffff:8.8.8.8', 'public'],
    ['::ffff:0:7f00:1', 'reserved'], // IPv4-translated
    ['64:ff9b::7f00:1', 'loopback'], // NAT64 of 127.0.0.1
    ['64:ff9b::169.254.169.254', 'metadata'],
    ['64:ff9b::808:808', 'public'], // DNS64 answer for 8.8.8.8
    ['64:ff9b:1::1', 'reserved'],
    ['2002:7f00:1::', 'loopback'], // 6to4 of 127.0.0.1
    ['2002:c0a8:101::1', 'private'],
    ['2002:808:808::1', 'public'],
    ['100::1', 'reserved'],
    ['2001::1', 'reserved'], // Teredo
    ['2001:db8::1', 'reserved'],
    ['3fff::1', 'reserved'],
    ['fc00::1', 'private'],
    ['fd12:3456:789a::1', 'private'],
    ['fd00:ec2::254', 'metadata'],
    ['fe80::1', 'link-local'],
    ['fe80::1%eth0', 'link-local'],
    ['febf::1', 'link-local'],
    ['fec0::1', 'private'],
    ['ff02::1', 'multicast'],
    ['ff05::1:3', 'multicast'],
    ['2606:4700:4700::1111', 'public'],
    ['2a00:1450:4001:81c::200e', 'public'],
    ['localhost', 'invalid'],
    ['', 'invalid'],
    ['127.1', 'invalid'],
    ['[::1]', 'invalid'],
  ];
  test.each(table)('%s is %s', (address, expected) => {
    expect(classifyAddress(address)).toBe(expected);
  });

  test('embedded IPv4 addresses are found in every notation', () => {
    expect(embeddedIPv4('::ffff:127.0.0.1')).toBe('127.0.0.1');
    expect(embeddedIPv4('0:0:0:0:0:ffff:7f00:0001')).toBe('127.0.0.1');
    expect(embeddedIPv4('64:ff9b::a9fe:a9fe')).toBe('169.254.169.254');
    expect(embeddedIPv4('2002:0a00:0001::')).toBe('10.0.0.1');
    expect(embeddedIPv4('2606:4700::1111')).toBeUndefined();
    expect(embeddedIPv4('::1')).toBeUndefined();
  });
});

describe('host names', () => {
  test.each([
    ['example.com', true, false],
    ['localhost', true, false],
    ['a-b.c_d.example.', true, false],
    ['127.0.0.1', false, true],
    ['1.2.3.4.', false, true],
    ['[::1]', false, true],
    ['::1', false, true],
    ['host.123', false, true],
    ['host.0x1f', false, true],
    ['-bad.example', false, false],
    ['bad-.example', false, false],
    ['a..b', false, false],
    [`${'a'.repeat(64)}.example`, false, false],
    ['', false, false],
  ])('%s: DNS name %s, IP literal %s', (hostname, dns, literal) => {
    expect(isDnsHostName(hostname)).toBe(dns);
    expect(isIpLiteral(hostname)).toBe(literal);
  });
});

describe('resolved addresses', () => {
  const names = new DestinationPolicy({ allowedHosts: ['internal.example'] });
  afterAll(() => names.close());

  test('public addresses pass', () => {
    expect(() => names.checkAddresses('api.example', ['8.8.8.8', '2606:4700:4700::1111'])).not.toThrow();
  });

  test.each(['127.0.0.1', '10.0.0.1', '169.254.169.254', '100.64.0.1', '::1', 'fe80::1', '::ffff:127.0.0.1'])(
    '%s is refused for a name that is not allow-listed',
    (address) => {
      expect(() => names.checkAddresses('api.example', [address])).toThrow(Errors.DestinationRefused);
    },
  );

  test('one refused address refuses the whole answer', () => {
    expect(() => names.checkAddresses('api.example', ['8.8.8.8', '10.0.0.1'])).toThrow(
      /non-public address \(private\)/,
    );
  });

  test('an allow-listed name may resolve to private addresses, compared without case or trailing dot', () => {
    expect(() => names.checkAddresses('internal.example', ['127.0.0.1', '10.0.0.1', '169.254.169.254'])).not.toThrow();
    expect(() => names.checkAddresses('INTERNAL.example.', ['127.0.0.1'])).not.toThrow();
    expect(() => names.checkAddresses('other.internal.example', ['127.0.0.1'])).toThrow(Errors.DestinationRefused);
  });

  test('unspecified, multicast and broadcast addresses are refused even for an allow-listed name', () => {
    for (const address of ['0.0.0.0', '::', '224.0.0.1', 'ff02::1', '255.255.255.255', 'not-an-address']) {
      expect(() => names.checkAddresses('internal.example', [address])).toThrow(/cannot be connected to/);
    }
  });

  test('an empty answer is unreachable, not refused', () => {
    expect(() => names.checkAddresses('api.example', [])).toThrow(Errors.UpstreamUnreachable);
  });

  test('the detail names the class, not the address', () => {
    try {
      names.checkAddresses('api.example', ['10.1.2.3']);
    } catch (error) {
      expect((error as VaultError).detail).not.toContain('10.1.2.3');
      expect(String((error as Error & { cause: Error }).cause.message)).toContain('10.1.2.3');
    }
    expect.assertions(2);
  });
});

describe('error mapping', () => {
  const withCode = (code: string, message = 'boom') => Object.assign(new Error(message), { code });
  test.each([
    ['UND_ERR_HEADERS_TIMEOUT', 'TV_UPSTREAM_TIMEOUT', 504],
    ['UND_ERR_BODY_TIMEOUT', 'TV_UPSTREAM_TIMEOUT', 504],
    ['UND_ERR_CONNECT_TIMEOUT', 'TV_UPSTREAM_UNREACHABLE', 502],
    ['UND_ERR_SOCKET', 'TV_UPSTREAM_UNREACHABLE', 502],
    ['ECONNREFUSED', 'TV_UPSTREAM_UNREACHABLE', 502],
    ['ECONNRESET', 'TV_UPSTREAM_UNREACHABLE', 502],
    ['EAI_AGAIN', 'TV_UPSTREAM_UNREACHABLE', 502],
    ['UNABLE_TO_VERIFY_LEAF_SIGNATURE', 'TV_UPSTREAM_UNREACHABLE', 502],
    ['ERR_TLS_CERT_ALTNAME_INVALID', 'TV_UPSTREAM_UNREACHABLE', 502],
    ['ERR_SSL_TLSV1_ALERT_PROTOCOL_VERSION', 'TV_UPSTREAM_UNREACHABLE', 502],
    ['UND_ERR_RES_EXCEEDED_MAX_SIZE', 'TV_UPSTREAM_RESPONSE_TOO_LARGE', 502],
  ])('%s → %s', (code, vaultCode, status) => {
    const mapped = toUpstreamError(withCode(code, 'secret response body')) as VaultError;
    expect(mapped).toBeInstanceOf(VaultError);
    expect(mapped.code).toBe(vaultCode);
    expect(mapped.status).toBe(status);
    expect(mapped.detail).not.toContain('secret');
  });

  test('aborts, programming errors and vault errors are returned as they are', () => {
    for (const error of [
      withCode('UND_ERR_ABORTED'),
      withCode('ABORT_ERR'),
      withCode('ERR_INVALID_ARG_TYPE'),
      new TypeError('x'),
      new Errors.DestinationRefused(),
    ]) {
      expect(toUpstreamError(error)).toBe(error);
    }
  });

  test('a header undici will not send is a 400', () => {
    const mapped = toUpstreamError(withCode('UND_ERR_INVALID_ARG', 'invalid keep-alive header')) as VaultError;
    expect(mapped.code).toBe('TV_INVALID_HEADER');
    expect(toUpstreamError(withCode('UND_ERR_INVALID_ARG', 'invalid method'))).toBeInstanceOf(Error);
  });
});
