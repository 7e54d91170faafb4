// PUBLIC_URL and RATE_LIMIT_PORTAL_LINKS_PER_MINUTE: defaults, normalisation, refusal at start.
import test from 'ava';
import { ConfigError, loadConfig, withBoundPort } from '../../src/config.ts';

test('PUBLIC_URL defaults to http://localhost:<PORT>; a trailing slash is dropped', (t) => {
  t.is(loadConfig({}).publicUrl, 'http://localhost:3000');
  t.is(loadConfig({ PORT: '8080' }).publicUrl, 'http://localhost:8080');
  t.is(loadConfig({ PUBLIC_URL: 'https://hooks.example.com/' }).publicUrl, 'https://hooks.example.com');
  t.is(loadConfig({ PUBLIC_URL: 'https://example.com/hookline//' }).publicUrl, 'https://example.com/hookline');
  t.is(loadConfig({ PUBLIC_URL: 'http://10.0.0.5:8080' }).publicUrl, 'http://10.0.0.5:8080');
});

test('the web role settles the default PUBLIC_URL on the port it bound (PORT=0); a PUBLIC_URL set stays', (t) => {
  t.is(withBoundPort(loadConfig({ PORT: '0' }), 41234).publicUrl, 'http://localhost:41234');
  t.is(withBoundPort(loadConfig({ PORT: '0', PUBLIC_URL: 'http://localhost:0/x' }), 41234).publicUrl, 'http://localhost:0/x');
  const config = loadConfig({ PORT: '8080' });
  t.is(withBoundPort(config, 8080), config);
  t.true(Object.isFrozen(withBoundPort(config, 41234)));
});

test('a PUBLIC_URL that is not a plain http(s) URL stops the start, naming the variable', (t) => {
  for (const value of ['hooks.example.com', 'ftp://example.com', 'https://user:pw@example.com', 'https://example.com/?a=1', 'https://example.com/#x', 'not a url']) {
    const error = t.throws(() => loadConfig({ PUBLIC_URL: value }), { instanceOf: ConfigError });
    t.regex(error?.message ?? '', /PUBLIC_URL/, value);
  }
});

test('RATE_LIMIT_PORTAL_SENDS_PER_MINUTE: default 60, a whole number of at least 1', (t) => {
  t.is(loadConfig({}).rateLimits.portalSendsPerMinute, 60);
  t.is(loadConfig({ RATE_LIMIT_PORTAL_SENDS_PER_MINUTE: '5' }).rateLimits.portalSendsPerMinute, 5);
  t.throws(() => loadConfig({ RATE_LIMIT_PORTAL_SENDS_PER_MINUTE: '0' }), { instanceOf: ConfigError, message: /RATE_LIMIT_PORTAL_SENDS_PER_MINUTE/ });
});

test('RATE_LIMIT_PORTAL_LINKS_PER_MINUTE: default 100, a whole number of at least 1', (t) => {
  t.is(loadConfig({}).rateLimits.portalLinksPerMinute, 100);
  t.is(loadConfig({ RATE_LIMIT_PORTAL_LINKS_PER_MINUTE: '5' }).rateLimits.portalLinksPerMinute, 5);
  t.throws(() => loadConfig({ RATE_LIMIT_PORTAL_LINKS_PER_MINUTE: '0' }), { instanceOf: ConfigError, message: /RATE_LIMIT_PORTAL_LINKS_PER_MINUTE/ });
});
