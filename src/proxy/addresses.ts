// Address and host-name classification for the outbound destination policy (destination-policy.ts). Ranges come
// from the IANA IPv4/IPv6 special-purpose address registries (RFC 6890 and successors) plus the cloud metadata
// endpoints; matching uses node:net BlockList. Addresses that embed an IPv4 address (IPv4-mapped, NAT64, 6to4) are
// classified by the embedded address, so ::ffff:127.0.0.1 and 64:ff9b::7f00:1 are loopback, while a DNS64 answer for
// a public address stays public.

import net from 'node:net';

/** What an address is, as far as the destination policy cares. `public` is the only class connected to freely. */
export type AddressClass =
  | 'public'
  | 'unspecified'
  | 'loopback'
  | 'private'
  | 'link-local'
  | 'cgnat'
  | 'multicast'
  | 'broadcast'
  | 'metadata'
  | 'reserved'
  | 'invalid';

/** Classes refused even for allow-listed host names: nothing legitimate is reached at them over TCP. */
export const NEVER_CONNECTABLE: ReadonlySet<AddressClass> = new Set([
  'unspecified',
  'multicast',
  'broadcast',
  'invalid',
]);

type Rule = [network: string, prefix: number];

// Checked in this order: the first class whose list holds the address wins (metadata before link-local, broadcast
// before 240/4, loopback before ::/96, ...).
const RULES: Array<[AddressClass, Rule[], Rule[]]> = [
  //            IPv4                                                        IPv6
  [
    'metadata',
    [
      ['169.254.169.254', 32], // AWS, GCP, Azure, OpenStack, DigitalOcean...
      ['169.254.170.2', 32], // AWS ECS task metadata
      ['100.100.100.200', 32], // Alibaba Cloud
      ['192.0.0.192', 32], // Oracle Cloud (legacy)
      ['168.63.129.16', 32], // Azure WireServer (a public address only reachable inside Azure)
    ],
    [['fd00:ec2::254', 128]], // AWS IMDS over IPv6
  ],
  ['unspecified', [['0.0.0.0', 8]], [['::', 128]]],
  ['loopback', [['127.0.0.0', 8]], [['::1', 128]]],
  ['broadcast', [['255.255.255.255', 32]], []],
  ['multicast', [['224.0.0.0', 4]], [['ff00::', 8]]],
  ['link-local', [['169.254.0.0', 16]], [['fe80::', 10]]],
  ['cgnat', [['100.64.0.0', 10]], []],
  [
    'private',
    [
      ['10.0.0.0', 8],
      ['172.16.0.0', 12],
      ['192.168.0.0', 16],
    ],
    [
      ['fc00::', 7], // unique local
      ['fec0::', 10], // site-local (deprecated)
    ],
  ],
  [
    'reserved',
    [
      ['192.0.0.0', 24], // IETF protocol assignments
      ['192.0.2.0', 24], // TEST-NET-1
      ['192.88.99.0', 24], // 6to4 relay anycast (deprecated)
      ['198.18.0.0', 15], // benchmarking
      ['198.51.100.0', 24], // TEST-NET-2
      ['203.0.113.0', 24], // TEST-NET-3
      ['240.0.0.0', 4], // reserved for future use
    ],
    [
      ['::', 96], // IPv4-compatible (deprecated)
      ['::ffff:0:0:0', 96], // IPv4-translated (SIIT)
      ['64:ff9b:1::', 48], // local-use NAT64
      ['100::', 64], // discard-only
      ['2001::', 23], // IETF protocol assignments: Teredo, benchmarking, ORCHID...
      ['2001:db8::', 32], // documentation
      ['3fff::', 20], // documentation (RFC 9637)
    ],
  ],
];

const LISTS: Array<[AddressClass, net.BlockList]> = RULES.map(([addressClass, v4, v6]) => {
  const list = new net.BlockList();
  for (const [network, prefix] of v4) list.addSubnet(network, prefix, 'ipv4');
  for (const [network, prefix] of v6) list.addSubnet(network, prefix, 'ipv6');
  return [addressClass, list];
});

/** Classifies an IP address (IPv4 dotted, or IPv6 with an optional %zone). Anything else is `invalid`. */
export function classifyAddress(address: string): AddressClass {
  const bare = stripZone(address);
  const family = net.isIP(bare);
  if (family === 0) return 'invalid';
  if (family === 6) {
    const embedded = embeddedIPv4(bare);
    if (embedded !== undefined) return classifyAddress(embedded);
  }
  const type = family === 4 ? 'ipv4' : 'ipv6';
  for (const [addressClass, list] of LISTS) if (list.check(bare, type)) return addressClass;
  return 'public';
}

/** The address without an IPv6 zone index (`fe80::1%eth0` → `fe80::1`). */
export function stripZone(address: string): string {
  const percent = address.indexOf('%');
  return percent === -1 ? address : address.slice(0, percent);
}

/**
 * The IPv4 address carried by an IPv4-mapped (::ffff:0:0/96), NAT64 (64:ff9b::/96) or 6to4 (2002::/16) address;
 * undefined for other addresses.
 */
export function embeddedIPv4(ipv6: string): string | undefined {
  const words = parseIPv6(ipv6);
  if (!words) return undefined;
  const zeros = (from: number, to: number) => words.slice(from, to).every((word) => word === 0);
  if (zeros(0, 5) && words[5] === 0xffff) return dotted(words[6], words[7]);
  if (words[0] === 0x64 && words[1] === 0xff9b && zeros(2, 6)) return dotted(words[6], words[7]);
  if (words[0] === 0x2002) return dotted(words[1], words[2]);
  return undefined;
}

function dotted(high: number, low: number): string {
  return `${high >> 8}.${high & 0xff}.${low >> 8}.${low & 0xff}`;
}

/** The eight 16-bit words of an IPv6 address (already known to be valid), or undefined. */
function parseIPv6(text: string): number[] | undefined {
  if (!net.isIPv6(text)) return undefined;
  let body = text.toLowerCase();
  const tail: number[] = [];
  const lastColon = body.lastIndexOf(':');
  const last = body.slice(lastColon + 1);
  if (last.includes('.')) {
    const octets = last.split('.').map(Number);
    tail.push((octets[0] << 8) | octets[1], (octets[2] << 8) | octets[3]);
    body = body.slice(0, lastColon + 1) + '0'; // placeholder word, replaced below
  }
  const [head, rest] = body.includes('::') ? body.split('::') : [body, undefined];
  const headWords = head === '' ? [] : head.split(':');
  const restWords = rest === undefined || rest === '' ? [] : rest.split(':');
  const total = tail.length > 0 ? 7 : 8; // the placeholder stands for two words
  const fill = rest === undefined ? 0 : total - headWords.length - restWords.length;
  const words = [...headWords, ...new Array<string>(fill).fill('0'), ...restWords].map((word) => parseInt(word, 16));
  if (tail.length > 0) words.splice(words.length - 1, 1, ...tail);
  return words.length === 8 && words.every((word) => Number.isInteger(word)) ? words : undefined;
}

/**
 * True when a URL host name is an IP literal in any notation. WHATWG URL parsing already turns decimal, hex, octal and
 * short IPv4 forms (2130706433, 0x7f000001, 0177.0.0.1, 127.1) into dotted form and keeps IPv6 in brackets; names whose
 * last label is numeric (which a resolver's inet_aton could still read as an address) count as literals too.
 */
export function isIpLiteral(hostname: string): boolean {
  if (hostname.startsWith('[') || hostname.includes(':')) return true;
  const bare = hostname.endsWith('.') ? hostname.slice(0, -1) : hostname;
  if (net.isIP(bare) !== 0) return true;
  const lastLabel = bare.slice(bare.lastIndexOf('.') + 1).toLowerCase();
  return /^(0x[0-9a-f]*|[0-9]+)$/.test(lastLabel);
}

const LABEL = /^[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?$/;

/** True for a syntactically valid DNS host name (lower-case, punycode for IDNs, optional trailing dot). */
export function isDnsHostName(hostname: string): boolean {
  const bare = hostname.endsWith('.') ? hostname.slice(0, -1) : hostname;
  if (bare === '' || bare.length > 253 || isIpLiteral(bare)) return false;
  return bare.split('.').every((label) => LABEL.test(label));
}

/** The form host names are compared in: lower-case, without a trailing dot. */
export function normalizeHostName(hostname: string): string {
  const lower = hostname.trim().toLowerCase();
  return lower.endsWith('.') ? lower.slice(0, -1) : lower;
}
