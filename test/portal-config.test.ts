// PORTAL_FRAME_ANCESTORS: a CSP source list, default 'self'; a malformed value is refused at
// start with a message naming the variable (so nothing can be smuggled into the header).
import test from 'ava';
import { ConfigError, loadConfig } from '../src/config.ts';

test("PORTAL_FRAME_ANCESTORS defaults to 'self' and takes a CSP source list", (t) => {
  t.is(loadConfig({}).portalFrameAncestors, "'self'");
  t.is(loadConfig({ PORTAL_FRAME_ANCESTORS: "'self'  https://app.example.com https://*.example.org:8443 http://127.0.0.1:*" }).portalFrameAncestors,
    "'self' https://app.example.com https://*.example.org:8443 http://127.0.0.1:*");
  t.is(loadConfig({ PORTAL_FRAME_ANCESTORS: "'none'" }).portalFrameAncestors, "'none'");
  t.is(loadConfig({ PORTAL_FRAME_ANCESTORS: 'https:' }).portalFrameAncestors, 'https:');
});

for (const bad of ["'self'; script-src *", "'none' https://a.example.com", "https://a.example.com,https://b.example.com", 'https://exa mple.com"']) {
  test(`PORTAL_FRAME_ANCESTORS=${bad} stops the start with a message naming it`, (t) => {
    const error = t.throws(() => loadConfig({ PORTAL_FRAME_ANCESTORS: bad }), { instanceOf: ConfigError });
    t.regex(error!.message, /PORTAL_FRAME_ANCESTORS: must be a space-separated CSP source list/);
  });
}

// A shell eats the quotes of PORTAL_FRAME_ANCESTORS='self': unquoted, `self` and `none` are host
// sources CSP accepts (a host named self), so framing by the same origin was refused in silence.
for (const bare of ['self', 'none', 'SELF', "https://app.example.com self", "'self' none"]) {
  test(`PORTAL_FRAME_ANCESTORS=${bare}: a keyword without its quotes stops the start, saying so`, (t) => {
    const error = t.throws(() => loadConfig({ PORTAL_FRAME_ANCESTORS: bare }), { instanceOf: ConfigError });
    t.regex(error!.message, /^invalid configuration: PORTAL_FRAME_ANCESTORS: (self|none|SELF) is the CSP keyword '(self|none)' without its single quotes/);
  });
}

test('host sources that only contain a keyword stay accepted', (t) => {
  const list = 'https://self.example.com self.example.com http://self none:* https://none.example.org/';
  t.is(loadConfig({ PORTAL_FRAME_ANCESTORS: list }).portalFrameAncestors, list);
});

// CSP's other keywords are no frame-ancestors source: unquoted, `unsafe-inline` was taken as a
// host of that name (a value meant for another directive started in silence).
for (const other of ['unsafe-inline', "'unsafe-inline'", "'self' strict-dynamic", "https://app.example.com 'unsafe-eval'", 'WASM-UNSAFE-EVAL']) {
  test(`PORTAL_FRAME_ANCESTORS=${other}: another CSP keyword stops the start, saying frame-ancestors does not take it`, (t) => {
    const error = t.throws(() => loadConfig({ PORTAL_FRAME_ANCESTORS: other }), { instanceOf: ConfigError });
    t.regex(error!.message, /^invalid configuration: PORTAL_FRAME_ANCESTORS: '?[a-z-]+'? is a CSP keyword that frame-ancestors does not take/i);
  });
}

test('hosts that only contain another keyword stay accepted', (t) => {
  const list = 'https://unsafe-inline.example.com strict-dynamic.example.org';
  t.is(loadConfig({ PORTAL_FRAME_ANCESTORS: list }).portalFrameAncestors, list);
});

test("a source naming a page (a path or a query) is refused with the origin to give instead; so is a scheme no site has", (t) => {
  // A probe gave its embedding page's URL: the process started, and every frame was refused at
  // run time (frame-ancestors matches the embedding page's origin only).
  for (const [page, origin] of [
    ['http://127.0.0.1:46110/webhooks?x=1', 'http://127.0.0.1:46110'],
    ['https://app.example.com/settings/webhooks', 'https://app.example.com'],
    ['app.example.com/webhooks', 'app.example.com'],
  ] as const) {
    const error = t.throws(() => loadConfig({ PORTAL_FRAME_ANCESTORS: `'self' ${page}` }), { instanceOf: ConfigError });
    t.true(error?.message.includes(`PORTAL_FRAME_ANCESTORS: ${page} names a page`) && error.message.includes(`give ${origin}`), error?.message);
  }
  for (const scheme of ['javascript:', 'data:', 'blob:', 'ftp://app.example.com', 'wss://b.example.com']) {
    const error = t.throws(() => loadConfig({ PORTAL_FRAME_ANCESTORS: `'self' ${scheme}` }), { instanceOf: ConfigError });
    t.true(error?.message.includes(`${scheme} is no scheme`), error?.message);
  }
  // An origin with its slash, and the schemes of the web, stay accepted.
  t.is(loadConfig({ PORTAL_FRAME_ANCESTORS: 'https://app.example.com/ http: https: HTTP://b.example.com:8080' }).portalFrameAncestors, 'https://app.example.com/ http: https: HTTP://b.example.com:8080');
});
