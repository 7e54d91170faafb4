// Which webhook destination URLs and addresses are allowed (decisions sections 6 and 8): the API
// checks a URL when an endpoint is created or patched, the delivery worker checks every address
// a host resolves to. Names are not resolved here.
import { BlockList, isIP } from 'node:net';

export type DestinationCheck = { ok: true; url: URL } | { ok: false; reason: string };

const MAX_URL_LENGTH = 2048;

// Ranges nobody outside this network should make us connect to: unspecified, private, shared
// (carrier-grade NAT), loopback, link-local, IETF protocol, documentation, benchmarking,
// multicast and reserved (which includes the 255.255.255.255 broadcast).
const BLOCKED_IPV4: ReadonlyArray<readonly [string, number]> = [
  ['0.0.0.0', 8],
  ['10.0.0.0', 8],
  ['100.64.0.0', 10],
  ['127.0.0.0', 8],
  ['169.254.0.0', 16],
  ['172.16.0.0', 12],
  ['192.0.0.0', 24],
  ['192.0.2.0', 24],
  ['192.88.99.0', 24], // 6to4 relay anycast, deprecated (RFC 7526): a relay of someone else's choosing
  ['192.168.0.0', 16],
  ['198.18.0.0', 15],
  ['198.51.100.0', 24],
  ['203.0.113.0', 24],
  ['224.0.0.0', 4],
  ['240.0.0.0', 4],
];

// The IPv6 counterparts. 2001:2::/48 (benchmarking, the twin of 198.18/15) and 3fff::/20
// (documentation since RFC 9637) are here because the contract names those kinds of range.
const BLOCKED_IPV6: ReadonlyArray<readonly [string, number]> = [
  ['::', 128],
  ['::1', 128],
  ['::', 96], // IPv4-compatible, deprecated: nothing legitimate lives there
  ['fe80::', 10], // link-local
  ['fec0::', 10], // site-local, deprecated
  ['fc00::', 7], // unique-local
  ['ff00::', 8], // multicast
  ['2001:db8::', 32], // documentation
  ['3fff::', 20], // documentation
  ['2001:2::', 48], // benchmarking
  ['100::', 64], // discard-only
  ['2001::', 32], // Teredo: tunnels to an address we cannot see
  ['2001:10::', 28], // ORCHID, deprecated
  ['2001:20::', 28], // ORCHIDv2: identifiers, not locators
  ['64:ff9b:1::', 48], // local-use NAT64, translates to whatever the local network chooses
];

// Prefixes that carry an IPv4 address inside: the IPv6 address is as dangerous as the IPv4 one,
// so it is judged by it. `word` is the index of the 16-bit group where the IPv4 address starts.
const EMBEDDING_IPV4: ReadonlyArray<{ prefix: string; bits: number; word: number }> = [
  { prefix: '::ffff:0:0', bits: 96, word: 6 }, // IPv4-mapped
  { prefix: '64:ff9b::', bits: 96, word: 6 }, // well-known NAT64
  { prefix: '2002::', bits: 16, word: 1 }, // 6to4
];

function blockList(ranges: ReadonlyArray<readonly [string, number]>, type: 'ipv4' | 'ipv6'): BlockList {
  const list = new BlockList();
  for (const [network, prefix] of ranges) list.addSubnet(network, prefix, type);
  return list;
}

const blockedIpv4 = blockList(BLOCKED_IPV4, 'ipv4');
const blockedIpv6 = blockList(BLOCKED_IPV6, 'ipv6');
const embeddings = EMBEDDING_IPV4.map((e) => ({ list: blockList([[e.prefix, e.bits]], 'ipv6'), word: e.word }));
// Global unicast: everything IANA hands out to networks on the internet. The rest of the IPv6
// space (but the IPv4 embeddings above) is reserved or special-purpose: IPv4-translated
// ::ffff:0:0:0/96, the rest of ::/8, 5f00::/16 (segment routing) and whatever is added later.
// A probe reached ::ffff:0:127.0.0.1 and ::2:0:0:1 when only named ranges were refused.
const globalUnicast = blockList([['2000::', 3]], 'ipv6');

/** The eight 16-bit groups of an address that `isIP` already accepted as IPv6 (no zone id). */
function ipv6Words(address: string): number[] {
  let text = address;
  const lastColon = text.lastIndexOf(':');
  const tail = text.slice(lastColon + 1);
  if (tail.includes('.')) {
    // A trailing dotted quad ("::ffff:127.0.0.1") is two groups written differently.
    const [a = 0, b = 0, c = 0, d = 0] = tail.split('.').map(Number);
    text = `${text.slice(0, lastColon + 1)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const groups = (part: string | undefined) => (part ? part.split(':').map((g) => parseInt(g, 16)) : []);
  const [head, rest] = text.split('::');
  const before = groups(head);
  const after = groups(rest);
  const zeros = rest === undefined ? [] : new Array<number>(8 - before.length - after.length).fill(0);
  return [...before, ...zeros, ...after];
}

/**
 * Whether an IPv4 or IPv6 address (no brackets) is in a range deliveries must not reach.
 * Anything that is not a plain IP address is blocked too: what cannot be classified is refused.
 */
export function isBlockedAddress(address: string): boolean {
  const version = isIP(address);
  if (version === 4) return blockedIpv4.check(address, 'ipv4');
  // A zone id ("fe80::1%eth0") picks an interface, which a webhook destination never needs.
  if (version !== 6 || address.includes('%')) return true;
  if (blockedIpv6.check(address, 'ipv6')) return true;
  for (const { list, word } of embeddings) {
    if (!list.check(address, 'ipv6')) continue;
    const words = ipv6Words(address);
    const high = words[word] ?? 0;
    const low = words[word + 1] ?? 0;
    return blockedIpv4.check(`${high >> 8}.${high & 0xff}.${low >> 8}.${low & 0xff}`, 'ipv4');
  }
  return !globalUnicast.check(address, 'ipv6');
}

/** `localhost` and `*.localhost` always mean this machine (RFC 6761), whatever DNS says. */
function isLocalhostName(hostname: string): boolean {
  const name = hostname.toLowerCase().replace(/\.+$/, '');
  return name === 'localhost' || name.endsWith('.localhost');
}

/**
 * Whether `value` may be a webhook destination. `allowPrivate` (ALLOW_PRIVATE_DESTINATIONS) also
 * allows http:// and loopback/private hosts; the length, credential and scheme rules stay.
 * On success `url` is the parsed, normalised URL.
 */
export function checkDestinationUrl(value: string, allowPrivate: boolean): DestinationCheck {
  if (value.length > MAX_URL_LENGTH) return { ok: false, reason: `URL must be at most ${MAX_URL_LENGTH} characters` };
  // URL parsing silently drops surrounding spaces and tabs or newlines anywhere, so the URL used
  // would differ from the one shown; ask for a clean string instead.
  if (/[\u0000-\u0020\u007f]/.test(value)) return { ok: false, reason: 'URL must not contain spaces or control characters' };
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return { ok: false, reason: 'URL is not a valid absolute URL' };
  }
  if (url.protocol !== 'https:' && !(allowPrivate && url.protocol === 'http:')) {
    return { ok: false, reason: allowPrivate ? 'URL must use http:// or https://' : 'URL must use https://' };
  }
  // Credentials in a URL end up in logs and in every copy of the endpoint; custom headers exist.
  if (url.username !== '' || url.password !== '') return { ok: false, reason: 'URL must not contain a username or password' };
  // "https://./" parses; a host made only of dots names nothing.
  if (url.hostname.replace(/\.+$/, '') === '') return { ok: false, reason: 'URL must have a host name' };
  // ".example.com" and "example..com" parse too, and resolve to nothing; a trailing dot is fine.
  if (url.hostname.replace(/\.$/, '').split('.').includes('')) return { ok: false, reason: 'URL host name must not have an empty label' };
  // Port 0 parses, and no connection can be made to it.
  if (url.port === '0') return { ok: false, reason: 'URL port must be between 1 and 65535' };
  if (allowPrivate) return { ok: true, url };
  if (isLocalhostName(url.hostname)) return { ok: false, reason: 'URL must not point to localhost' };
  // The parser has already turned every IPv4 spelling (decimal, octal, hex, short) into a dotted
  // quad and wrapped IPv6 in brackets, so anything else here is a name, to be checked once resolved.
  const literal = url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
  if (isIP(literal) !== 0 && isBlockedAddress(literal)) {
    return { ok: false, reason: 'URL must not point to a private, loopback, link-local or otherwise reserved IP address' };
  }
  return { ok: true, url };
}

/**
 * checkDestinationUrl for a URL being written (an endpoint's or an operational endpoint's create
 * or PATCH), and spellings refused only there, so that a URL stored before keeps being delivered
 * to. The URL is stored and shown as given and delivered to what this parser reads: spellings it
 * repairs, which another reader of the stored URL may read otherwise, are refused (a probe):
 * `https://example.com\@evil.com/` (example.com here, evil.com to others), `https:example.com` and
 * `https:///example.com` (both https://example.com/ here); and a host
 * name DNS cannot hold (labels of at most 63 octets, 253 in all: RFC 1035), which parses and then
 * fails every delivery with dns_error.
 */
export function checkWrittenUrl(value: string, allowPrivate: boolean): DestinationCheck {
  const check = checkDestinationUrl(value, allowPrivate);
  if (!check.ok) return check;
  if (value.includes('\\')) return { ok: false, reason: 'URL must not contain a backslash (parsers read it differently): use /' };
  if (!/^https?:\/\/[^/]/i.test(value)) return { ok: false, reason: `URL must start with ${check.url.protocol}// and the host name` };
  const name = check.url.hostname.replace(/\.$/, '');
  if (!check.url.hostname.startsWith('[') && isIP(name) === 0 && (name.length > 253 || name.split('.').some((label) => label.length > 63))) {
    return { ok: false, reason: 'URL host name must have labels of at most 63 characters and at most 253 in all' };
  }
  return check;
}
