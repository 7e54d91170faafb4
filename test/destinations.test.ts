import test from 'ava';
import { checkDestinationUrl, checkWrittenUrl, isBlockedAddress } from '../src/core/destinations.ts';

// [label, address, blocked]. Each range is pinned at both ends, with the neighbours just outside
// it allowed where those are ordinary public addresses.
const addresses: Array<[string, string, boolean]> = [
  ['public IPv4 8.8.8.8', '8.8.8.8', false],
  ['public IPv4 1.1.1.1', '1.1.1.1', false],
  ['0/8 start', '0.0.0.0', true],
  ['0/8 end', '0.255.255.255', true],
  ['0/8 upper neighbour', '1.0.0.0', false],
  ['10/8 lower neighbour', '9.255.255.255', false],
  ['10/8 start', '10.0.0.0', true],
  ['10/8 end', '10.255.255.255', true],
  ['10/8 upper neighbour', '11.0.0.0', false],
  ['100.64/10 lower neighbour', '100.63.255.255', false],
  ['100.64/10 start', '100.64.0.0', true],
  ['100.64/10 end', '100.127.255.255', true],
  ['100.64/10 upper neighbour', '100.128.0.0', false],
  ['127/8 lower neighbour', '126.255.255.255', false],
  ['127/8 loopback', '127.0.0.1', true],
  ['127/8 end', '127.255.255.255', true],
  ['127/8 upper neighbour', '128.0.0.0', false],
  ['169.254/16 lower neighbour', '169.253.255.255', false],
  ['169.254/16 start', '169.254.0.0', true],
  ['169.254/16 cloud metadata', '169.254.169.254', true],
  ['169.254/16 end', '169.254.255.255', true],
  ['169.254/16 upper neighbour', '169.255.0.0', false],
  ['172.16/12 lower neighbour', '172.15.255.255', false],
  ['172.16/12 start', '172.16.0.0', true],
  ['172.16/12 end', '172.31.255.255', true],
  ['172.16/12 upper neighbour', '172.32.0.0', false],
  ['192.0.0/24 lower neighbour', '191.255.255.255', false],
  ['192.0.0/24 start', '192.0.0.0', true],
  ['192.0.0/24 end', '192.0.0.255', true],
  ['between 192.0.0/24 and 192.0.2/24', '192.0.1.0', false],
  ['192.0.2/24 start', '192.0.2.0', true],
  ['192.0.2/24 end', '192.0.2.255', true],
  ['192.0.2/24 upper neighbour', '192.0.3.0', false],
  ['192.88.99/24 lower neighbour', '192.88.98.255', false],
  ['192.88.99/24 6to4 relay anycast start', '192.88.99.0', true],
  ['192.88.99/24 a probe accepted it', '192.88.99.1', true],
  ['192.88.99/24 end', '192.88.99.255', true],
  ['192.88.99/24 upper neighbour', '192.88.100.0', false],
  ['192.168/16 lower neighbour', '192.167.255.255', false],
  ['192.168/16 start', '192.168.0.0', true],
  ['192.168/16 end', '192.168.255.255', true],
  ['192.168/16 upper neighbour', '192.169.0.0', false],
  ['198.18/15 lower neighbour', '198.17.255.255', false],
  ['198.18/15 start', '198.18.0.0', true],
  ['198.18/15 end', '198.19.255.255', true],
  ['198.18/15 upper neighbour', '198.20.0.0', false],
  ['198.51.100/24 lower neighbour', '198.51.99.255', false],
  ['198.51.100/24 start', '198.51.100.0', true],
  ['198.51.100/24 end', '198.51.100.255', true],
  ['198.51.100/24 upper neighbour', '198.51.101.0', false],
  ['203.0.113/24 lower neighbour', '203.0.112.255', false],
  ['203.0.113/24 start', '203.0.113.0', true],
  ['203.0.113/24 end', '203.0.113.255', true],
  ['203.0.113/24 upper neighbour', '203.0.114.0', false],
  ['224/4 lower neighbour', '223.255.255.255', false],
  ['224/4 multicast start', '224.0.0.0', true],
  ['224/4 multicast end', '239.255.255.255', true],
  ['240/4 reserved start', '240.0.0.0', true],
  ['240/4 broadcast', '255.255.255.255', true],

  ['public IPv6 compressed', '2606:4700::1111', false],
  ['public IPv6 expanded', '2606:4700:0:0:0:0:0:1111', false],
  ['public IPv6 fully padded', '2606:4700:0000:0000:0000:0000:0000:1111', false],
  ['public IPv6 Google DNS', '2001:4860:4860::8888', false],
  ['::/128 compressed', '::', true],
  ['::/128 expanded', '0:0:0:0:0:0:0:0', true],
  ['::1/128 compressed', '::1', true],
  ['::1/128 expanded', '0000:0000:0000:0000:0000:0000:0000:0001', true],
  ['::/96 IPv4-compatible dotted', '::8.8.8.8', true],
  ['::/96 IPv4-compatible end', '::ffff:ffff', true],
  ['fe80::/10 start', 'fe80::', true],
  ['fe80::/10 uppercase', 'FE80::1', true],
  ['fe80::/10 end', 'febf:ffff:ffff:ffff:ffff:ffff:ffff:ffff', true],
  ['fec0::/10 site-local', 'fec0::1', true],
  ['fec0::/10 end', 'feff:ffff:ffff:ffff:ffff:ffff:ffff:ffff', true],
  ['fc00::/7 start', 'fc00::', true],
  ['fc00::/7 fd', 'fd12:3456:789a::1', true],
  ['fc00::/7 end', 'fdff:ffff:ffff:ffff:ffff:ffff:ffff:ffff', true],
  ['ff00::/8 all nodes', 'ff02::1', true],
  ['ff00::/8 end', 'ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff', true],
  ['2001:db8::/32 lower neighbour', '2001:db7:ffff:ffff:ffff:ffff:ffff:ffff', false],
  ['2001:db8::/32 start', '2001:db8::', true],
  ['2001:db8::/32 expanded', '2001:0db8:0000:0000:0000:0000:0000:0001', true],
  ['2001:db8::/32 end', '2001:db8:ffff:ffff:ffff:ffff:ffff:ffff', true],
  ['2001:db8::/32 upper neighbour', '2001:db9::', false],
  ['3fff::/20 documentation start', '3fff::', true],
  ['3fff::/20 documentation end', '3fff:fff:ffff:ffff:ffff:ffff:ffff:ffff', true],
  ['3fff::/20 upper neighbour', '3fff:1000::', false],
  ['2001:2::/48 benchmarking', '2001:2::1', true],
  ['2001:2::/48 upper neighbour', '2001:2:1::', false],
  ['100::/64 start', '100::', true],
  ['100::/64 end', '100::ffff:ffff:ffff:ffff', true],
  ['2001::/32 Teredo start', '2001::', true],
  ['2001::/32 Teredo end', '2001:0:ffff:ffff:ffff:ffff:ffff:ffff', true],
  ['2001::/32 Teredo upper neighbour', '2001:1::1', false],
  ['64:ff9b:1::/48 start', '64:ff9b:1::', true],
  ['64:ff9b:1::/48 end', '64:ff9b:1:ffff:ffff:ffff:ffff:ffff', true],
  // Outside global unicast 2000::/3, not named above (a probe connected to the first three).
  ['::ffff:0:0:0/96 IPv4-translated loopback', '::ffff:0:127.0.0.1', true],
  ['::ffff:0:0:0/96 IPv4-translated private', '::ffff:0:10.0.0.1', true],
  ['::/8 reserved', '::2:0:0:1', true],
  ['5f00::/16 segment routing', '5f00::1', true],
  ['4000::/3 unassigned', '4000::1', true],
  ['1fff:... just below 2000::/3', '1fff:ffff:ffff:ffff:ffff:ffff:ffff:ffff', true],
  ['2000::/3 start', '2000::1', false],
  ['2000::/3 end', '3ffe:ffff:ffff:ffff:ffff:ffff:ffff:ffff', false],
  ['2001:10::/28 ORCHID', '2001:10::1', true],
  ['2001:20::/28 ORCHIDv2 end', '2001:2f:ffff:ffff:ffff:ffff:ffff:ffff', true],
  ['2001:20::/28 upper neighbour', '2001:30::1', false],

  ['IPv4-mapped loopback dotted', '::ffff:127.0.0.1', true],
  ['IPv4-mapped loopback hex', '::ffff:7f00:1', true],
  ['IPv4-mapped loopback uppercase', '::FFFF:7F00:1', true],
  ['IPv4-mapped loopback expanded', '0:0:0:0:0:ffff:7f00:1', true],
  ['IPv4-mapped loopback expanded dotted', '0:0:0:0:0:ffff:127.0.0.1', true],
  ['IPv4-mapped private', '::ffff:10.0.0.1', true],
  ['IPv4-mapped metadata', '::ffff:a9fe:a9fe', true],
  ['IPv4-mapped unspecified', '::ffff:0.0.0.0', true],
  ['IPv4-mapped public dotted', '::ffff:8.8.8.8', false],
  ['IPv4-mapped public hex', '::ffff:808:808', false],
  ['IPv4-mapped 172.15.255.255 allowed', '::ffff:172.15.255.255', false],
  ['IPv4-mapped 172.16.0.0 blocked', '::ffff:172.16.0.0', true],
  ['NAT64 private hex', '64:ff9b::a00:1', true],
  ['NAT64 private dotted', '64:ff9b::10.0.0.1', true],
  ['NAT64 loopback expanded', '64:ff9b:0:0:0:0:7f00:1', true],
  ['NAT64 public hex', '64:ff9b::808:808', false],
  ['NAT64 public dotted', '64:ff9b::8.8.8.8', false],
  ['6to4 loopback', '2002:7f00:1::', true],
  ['6to4 private with host part', '2002:a00:1::1', true],
  ['6to4 192.168 expanded', '2002:c0a8:0101:0000:0000:0000:0000:0001', true],
  ['6to4 public', '2002:808:808::', false],
  ['6to4 public with host part', '2002:808:808::1', false],
  ['6to4 100.63.255.255 allowed', '2002:643f:ffff::', false],
  ['6to4 100.64.0.0 blocked', '2002:6440::', true],

  ['not an address: empty', '', true],
  ['not an address: a name', 'example.com', true],
  ['not an address: localhost', 'localhost', true],
  ['not an address: bracketed IPv6', '[2606:4700::1111]', true],
  ['not an address: short IPv4', '8.8', true],
  ['not an address: decimal IPv4', '134744072', true],
  ['not an address: leading zero IPv4', '008.008.008.008', true],
  ['not an address: surrounding space', ' 8.8.8.8', true],
  ['not an address: five parts', '8.8.8.8.8', true],
  ['not an address: two ::', '2606::4700::1111', true],
  ['not an address: public IPv6 with zone id', '2606:4700::1111%eth0', true],
];

for (const [label, address, blocked] of addresses) {
  test(`isBlockedAddress: ${label} (${address || 'empty'}) is ${blocked ? 'blocked' : 'allowed'}`, (t) => {
    t.is(isBlockedAddress(address), blocked);
  });
}

// Each refusal is matched on its reason, so a URL refused for the wrong rule fails its test.
const reason = {
  invalid: /not a valid absolute URL/,
  https: /must use https:\/\/$/,
  httpOrHttps: /must use http:\/\/ or https:\/\//,
  length: /at most 2048 characters/,
  credentials: /username or password/,
  localhost: /localhost/,
  address: /private, loopback/,
  whitespace: /spaces or control characters/,
  noHost: /must have a host name/,
  emptyLabel: /empty label/,
  port: /port must be between 1 and 65535/,
};

type Expected = { href: string } | { reason: RegExp };

const longUrl = (length: number) => {
  const start = 'https://example.com/';
  return start + 'a'.repeat(length - start.length);
};

// [label, input, allowPrivate, expected]
const urls: Array<[string, string, boolean, Expected]> = [
  ['public name', 'https://example.com/hooks?x=1', false, { href: 'https://example.com/hooks?x=1' }],
  ['public name is normalised', 'HTTPS://Example.COM', false, { href: 'https://example.com/' }],
  ['public name with port', 'https://example.com:8443/in', false, { href: 'https://example.com:8443/in' }],
  ['public IPv4 literal', 'https://8.8.8.8/', false, { href: 'https://8.8.8.8/' }],
  ['public IPv6 literal', 'https://[2606:4700::1111]/', false, { href: 'https://[2606:4700::1111]/' }],
  ['public IPv6 literal expanded', 'https://[2606:4700:0:0:0:0:0:1111]/', false, { href: 'https://[2606:4700::1111]/' }],
  ['public IPv4-mapped literal', 'https://[::ffff:8.8.8.8]/', false, { href: 'https://[::ffff:808:808]/' }],
  ['public NAT64 literal', 'https://[64:ff9b::808:808]/', false, { href: 'https://[64:ff9b::808:808]/' }],
  ['172.15.255.255 is outside 172.16/12', 'https://172.15.255.255/', false, { href: 'https://172.15.255.255/' }],
  ['172.32.0.0 is outside 172.16/12', 'https://172.32.0.0/', false, { href: 'https://172.32.0.0/' }],
  ['100.63.255.255 is outside 100.64/10', 'https://100.63.255.255/', false, { href: 'https://100.63.255.255/' }],
  ['a name merely containing localhost', 'https://localhost.example.com/', false, { href: 'https://localhost.example.com/' }],
  ['a name ending in localhost without a dot', 'https://notlocalhost/', false, { href: 'https://notlocalhost/' }],
  ['empty userinfo carries no credentials', 'https://@example.com/', false, { href: 'https://example.com/' }],

  ['http refused', 'http://example.com/', false, { reason: reason.https }],
  ['http allowed with allowPrivate', 'http://example.com/', true, { href: 'http://example.com/' }],
  ['ftp refused', 'ftp://example.com/', false, { reason: reason.https }],
  ['ftp refused with allowPrivate', 'ftp://example.com/', true, { reason: reason.httpOrHttps }],
  ['javascript refused', 'javascript:alert(1)', false, { reason: reason.https }],
  ['javascript refused with allowPrivate', 'javascript:alert(1)', true, { reason: reason.httpOrHttps }],
  ['wss refused with allowPrivate', 'wss://example.com/', true, { reason: reason.httpOrHttps }],
  ['file refused with allowPrivate', 'file:///etc/passwd', true, { reason: reason.httpOrHttps }],

  ['user and password refused', 'https://user:pw@example.com', false, { reason: reason.credentials }],
  ['user alone refused', 'https://user@example.com', false, { reason: reason.credentials }],
  ['password alone refused', 'https://:pw@example.com', false, { reason: reason.credentials }],
  ['credentials refused with allowPrivate', 'http://user:pw@127.0.0.1/', true, { reason: reason.credentials }],
  ['credentials that look like a host refused', 'https://127.0.0.1:443@example.com/', false, { reason: reason.credentials }],

  ['2048 characters allowed', longUrl(2048), false, { href: longUrl(2048) }],
  ['2049 characters refused', longUrl(2049), false, { reason: reason.length }],
  ['2049 characters refused with allowPrivate', longUrl(2049), true, { reason: reason.length }],

  ['empty string', '', false, { reason: reason.invalid }],
  ['a name with a trailing dot', 'https://example.com./', false, { href: 'https://example.com./' }],
  ['a name starting with a dot', 'https://.example.com/', false, { reason: reason.emptyLabel }],
  ['a name with two dots in a row', 'https://example..com/', true, { reason: reason.emptyLabel }],
  ['port 0', 'https://example.com:0/', false, { reason: reason.port }],
  ['port 0 with allowPrivate', 'http://127.0.0.1:0/', true, { reason: reason.port }],
  ['port 65535', 'https://example.com:65535/', false, { href: 'https://example.com:65535/' }],
  ['port 65536', 'https://example.com:65536/', false, { reason: reason.invalid }],
  ['no scheme', 'example.com', false, { reason: reason.invalid }],
  ['scheme-relative', '//example.com/', false, { reason: reason.invalid }],
  ['no host', 'https://', false, { reason: reason.invalid }],
  ['unclosed IPv6 bracket', 'https://[::1', false, { reason: reason.invalid }],
  ['IPv4 octet over 255', 'https://256.0.0.1/', false, { reason: reason.invalid }],
  ['decimal IPv4 over 32 bits', 'https://4294967296/', false, { reason: reason.invalid }],
  ['five-part numeric host', 'https://1.2.3.4.5/', false, { reason: reason.invalid }],
  ['IPv6 zone id', 'https://[fe80::1%25eth0]/', false, { reason: reason.invalid }],
  ['bad percent escape in host', 'https://exa%mple.com/', false, { reason: reason.invalid }],
  ['host of dots only', 'https://./', false, { reason: reason.noHost }],
  ['host of dots only with allowPrivate', 'https://../', true, { reason: reason.noHost }],
  ['space in the middle', 'https://exa mple.com/', false, { reason: reason.whitespace }],
  ['leading space', ' https://example.com/', false, { reason: reason.whitespace }],
  ['trailing newline', 'https://example.com/\n', false, { reason: reason.whitespace }],
  ['tab inside the host', 'https://exa\tmple.com/', false, { reason: reason.whitespace }],
  ['space in the path', 'https://example.com/a b', false, { reason: reason.whitespace }],

  ['localhost', 'https://localhost/', false, { reason: reason.localhost }],
  ['localhost with port', 'https://localhost:8443/x', false, { reason: reason.localhost }],
  ['LOCALHOST. uppercase with trailing dot', 'https://LOCALHOST./', false, { reason: reason.localhost }],
  ['localhost with two trailing dots (an empty label)', 'https://localhost../', false, { reason: reason.emptyLabel }],
  ['subdomain of localhost', 'https://api.localhost/', false, { reason: reason.localhost }],
  ['subdomain of localhost mixed case with trailing dot', 'https://Api.LocalHost./', false, { reason: reason.localhost }],
  ['percent-encoded localhost', 'https://local%68ost/', false, { reason: reason.localhost }],
  ['fullwidth localhost', 'https://ｌｏｃａｌｈｏｓｔ/', false, { reason: reason.localhost }],

  ['IPv4 loopback', 'https://127.0.0.1/', false, { reason: reason.address }],
  ['IPv4 loopback with trailing dot', 'https://127.0.0.1./', false, { reason: reason.address }],
  ['IPv4 decimal spelling', 'https://2130706433/', false, { reason: reason.address }],
  ['IPv4 hex spelling', 'https://0x7f.1/', false, { reason: reason.address }],
  ['IPv4 whole hex spelling', 'https://0x7f000001/', false, { reason: reason.address }],
  ['IPv4 octal spelling', 'https://0177.0.0.1/', false, { reason: reason.address }],
  ['IPv4 short spelling', 'https://127.1/', false, { reason: reason.address }],
  ['IPv4 fullwidth digits', 'https://１２７.０.０.１/', false, { reason: reason.address }],
  ['IPv4 percent-encoded', 'https://%31%32%37.0.0.1/', false, { reason: reason.address }],
  ['IPv4 zero', 'https://0/', false, { reason: reason.address }],
  ['IPv4 unspecified', 'https://0.0.0.0/', false, { reason: reason.address }],
  ['IPv4 private 10/8', 'https://10.1.2.3/', false, { reason: reason.address }],
  ['IPv4 private 172.16/12', 'https://172.16.0.1/', false, { reason: reason.address }],
  ['IPv4 private 192.168/16', 'https://192.168.1.1/', false, { reason: reason.address }],
  ['IPv4 carrier-grade NAT', 'https://100.64.0.1/', false, { reason: reason.address }],
  ['IPv4 cloud metadata', 'https://169.254.169.254/latest/meta-data/', false, { reason: reason.address }],
  ['IPv4 documentation', 'https://192.0.2.1/', false, { reason: reason.address }],
  ['IPv4 multicast', 'https://224.0.0.1/', false, { reason: reason.address }],
  ['IPv4 broadcast in decimal', 'https://4294967295/', false, { reason: reason.address }],
  ['IPv6 loopback', 'https://[::1]/', false, { reason: reason.address }],
  ['IPv6 loopback expanded', 'https://[0:0:0:0:0:0:0:1]:8443/', false, { reason: reason.address }],
  ['IPv6 unspecified', 'https://[::]/', false, { reason: reason.address }],
  ['IPv6 link-local', 'https://[fe80::1]/', false, { reason: reason.address }],
  ['IPv6 unique-local', 'https://[fd00::1]/', false, { reason: reason.address }],
  ['IPv6 multicast', 'https://[ff02::1]/', false, { reason: reason.address }],
  ['IPv6 documentation', 'https://[2001:db8::1]/', false, { reason: reason.address }],
  ['IPv4-mapped loopback', 'https://[::ffff:127.0.0.1]/', false, { reason: reason.address }],
  ['IPv4-mapped loopback hex', 'https://[::ffff:7f00:1]/', false, { reason: reason.address }],
  ['NAT64 private', 'https://[64:ff9b::a00:1]/', false, { reason: reason.address }],
  ['NAT64 private dotted', 'https://[64:ff9b::10.0.0.1]/', false, { reason: reason.address }],
  ['6to4 loopback', 'https://[2002:7f00:1::]/', false, { reason: reason.address }],

  ['localhost allowed with allowPrivate', 'http://localhost:3000/hook', true, { href: 'http://localhost:3000/hook' }],
  ['subdomain of localhost allowed with allowPrivate', 'https://api.localhost/', true, { href: 'https://api.localhost/' }],
  ['IPv4 loopback allowed with allowPrivate', 'http://127.0.0.1:8080/', true, { href: 'http://127.0.0.1:8080/' }],
  ['IPv4 decimal spelling allowed with allowPrivate', 'https://2130706433/', true, { href: 'https://127.0.0.1/' }],
  ['IPv4 private allowed with allowPrivate', 'https://192.168.1.1/', true, { href: 'https://192.168.1.1/' }],
  ['IPv6 loopback allowed with allowPrivate', 'http://[::1]:8080/', true, { href: 'http://[::1]:8080/' }],
  ['IPv4-mapped loopback allowed with allowPrivate', 'https://[::ffff:127.0.0.1]/', true, { href: 'https://[::ffff:7f00:1]/' }],
];

for (const [label, input, allowPrivate, expected] of urls) {
  const mode = allowPrivate ? 'allowPrivate' : 'strict';
  test(`checkDestinationUrl (${mode}): ${label}`, (t) => {
    const result = checkDestinationUrl(input, allowPrivate);
    if ('href' in expected) {
      if (!result.ok) return t.fail(`refused: ${result.reason}`);
      t.true(result.url instanceof URL);
      t.is(result.url.href, expected.href);
    } else {
      if (result.ok) return t.fail(`accepted as ${result.url.href}`);
      t.regex(result.reason, expected.reason);
    }
  });
}

test('the 2048-character URLs really are 2048 and 2049 characters', (t) => {
  t.is(longUrl(2048).length, 2048);
  t.is(longUrl(2049).length, 2049);
});

// A URL being written (an endpoint's create or PATCH) is also refused in spellings the parser
// repairs, which another reader of the stored URL may read otherwise, and with a host name DNS
// cannot hold (a probe); a URL stored before is still delivered to (checkDestinationUrl).
const written: Array<[string, string, RegExp | null]> = [
  ['backslash before @: example.com to Node, evil.com to others', 'https://example.com\\@evil.com/', /backslash/],
  ['backslash in the path', 'https://example.com/a\\b', /backslash/],
  ['no // after the scheme', 'https:example.com/', /must start with https:\/\/ and the host name/],
  ['/// after the scheme', 'https:///example.com/', /must start with https:\/\/ and the host name/],
  ['a label of 64 characters', `https://${'a'.repeat(64)}.example.com/`, /labels of at most 63/],
  ['a name of 255 characters', `https://${Array.from({ length: 4 }, () => 'a'.repeat(62)).join('.')}.com/`, /at most 253/],
  ['a label of 63 characters', `https://${'a'.repeat(63)}.example.com/`, null],
  ['a name of 253 characters and a trailing dot', `https://${Array.from({ length: 4 }, () => 'a'.repeat(62)).join('.')}.a./`, null],
  ['an IDN name, checked as its punycode', 'https://bücher.example/', null],
  ['empty userinfo (no credentials)', 'https://@example.com/', null],
  ['still the rules of every URL', 'https://user:pw@example.com/', /username or password/],
];
for (const [label, input, refused] of written) {
  test(`checkWrittenUrl: ${label}`, (t) => {
    const check = checkWrittenUrl(input, false);
    if (refused) {
      t.false(check.ok);
      if (!check.ok) t.regex(check.reason, refused);
    } else {
      t.true(check.ok, JSON.stringify(check));
    }
    if (refused && !/username/.test(String(refused))) t.true(checkDestinationUrl(input, false).ok, 'still delivered to when stored before');
  });
}
