// Multi-host DATABASE_URL (issue 13, point 9): parsed into one URL per host, validated at start.
// The failover itself is test/failover.test.ts.
import test from 'ava';
import { ConfigError, loadConfig } from '../src/config.ts';
import { isMultiHost, parseMultiHostUrl } from '../src/db/database-url.ts';

test('a multi-host URL gives one single-host URL per host, in order, without target_session_attrs', (t) => {
  const url = 'postgresql://u:p%40ss@10.0.0.1:5433,db2,[::1]:6000/hookline?target_session_attrs=read-write&sslmode=disable';
  t.true(isMultiHost(url));
  const parsed = parseMultiHostUrl(url);
  t.deepEqual(parsed.hosts, [{ host: '10.0.0.1', port: '5433' }, { host: 'db2', port: '5432' }, { host: '[::1]', port: '6000' }]);
  t.is(parsed.forHost(0), 'postgresql://u:p%40ss@10.0.0.1:5433/hookline?sslmode=disable');
  t.is(parsed.forHost(1), 'postgresql://u:p%40ss@db2:5432/hookline?sslmode=disable');
  t.is(parsed.forHost(2), 'postgresql://u:p%40ss@[::1]:6000/hookline?sslmode=disable');
  t.is(parseMultiHostUrl('postgres://a,b/x').forHost(1), 'postgres://b:5432/x');
});

test('a single-host URL is not multi-host (its path is untouched)', (t) => {
  t.false(isMultiHost('postgres://u:p@db:5432/x?target_session_attrs=read-write'));
  t.false(isMultiHost('postgres://u:p@db:5432/x?options=a,b'));
  t.is(loadConfig({ DATABASE_URL: 'postgres://u:p@db:5432/x' }).databaseUrl, 'postgres://u:p@db:5432/x');
});

test('the configuration accepts read-write or primary and refuses other session attributes and bad hosts', (t) => {
  t.is(loadConfig({ DATABASE_URL: 'postgresql://u@h1:1,h2:2/d?target_session_attrs=read-write' }).databaseUrl,
    'postgresql://u@h1:1,h2:2/d?target_session_attrs=read-write');
  t.truthy(loadConfig({ DATABASE_URL: 'postgresql://u@h1,h2/d?target_session_attrs=primary' }));
  t.truthy(loadConfig({ DATABASE_URL: 'postgresql://u@h1,h2/d' }));
  const any = t.throws(() => loadConfig({ DATABASE_URL: 'postgresql://u@h1,h2/d?target_session_attrs=any' }), { instanceOf: ConfigError });
  t.regex(any.message, /DATABASE_URL: multi-host URL has target_session_attrs=any/);
  t.throws(() => loadConfig({ DATABASE_URL: 'postgresql://u@h1,:5/d' }), { instanceOf: ConfigError, message: /bad host ":5"/ });
  t.throws(() => loadConfig({ DATABASE_URL: 'postgresql://u@h1,h2:99999/d' }), { instanceOf: ConfigError, message: /bad host/ });
});

test('a single-host URL takes the same target_session_attrs: read-write or primary, others refused at start', (t) => {
  // node-postgres ignores the parameter: standby or a typo started and connected to the one host.
  for (const value of ['read-write', 'primary']) {
    t.truthy(loadConfig({ DATABASE_URL: `postgres://u:p@db:5432/x?sslmode=disable&target_session_attrs=${value}` }));
  }
  for (const value of ['standby', 'bogus', 'any', 'read-only', 'prefer-standby', '']) {
    const error = t.throws(() => loadConfig({ DATABASE_URL: `postgres://u:p@db:5432/x?target_session_attrs=${value}` }), { instanceOf: ConfigError });
    t.regex(error.message, new RegExp(`^invalid configuration: DATABASE_URL: URL has target_session_attrs=${value}; only read-write \\(the default\\) or primary is supported`), value);
  }
  // Given twice, libpq takes the last: a refused value in either place is refused.
  for (const query of ['target_session_attrs=read-write&target_session_attrs=standby', 'target_session_attrs=standby&target_session_attrs=primary']) {
    t.throws(() => loadConfig({ DATABASE_URL: `postgres://u:p@db:5432/x?${query}` }), { instanceOf: ConfigError, message: /target_session_attrs=standby/ }, query);
    t.throws(() => loadConfig({ DATABASE_URL: `postgresql://u@h1,h2/d?${query}` }), { instanceOf: ConfigError, message: /target_session_attrs=standby/ }, query);
  }
});

test('DATABASE_DIRECT_URL is held to the same rules as DATABASE_URL', (t) => {
  t.truthy(loadConfig({ DATABASE_DIRECT_URL: 'postgres://u@db/x?target_session_attrs=primary' }));
  t.throws(() => loadConfig({ DATABASE_DIRECT_URL: 'postgres://u@db/x?target_session_attrs=standby' }), { instanceOf: ConfigError, message: /DATABASE_DIRECT_URL: URL has target_session_attrs=standby/ });
  t.throws(() => loadConfig({ DATABASE_DIRECT_URL: 'postgresql://u@h1,h2/d?target_session_attrs=any' }), { instanceOf: ConfigError, message: /DATABASE_DIRECT_URL: multi-host URL has target_session_attrs=any/ });
  t.throws(() => loadConfig({ DATABASE_DIRECT_URL: 'postgresql://u@h1,:5/d' }), { instanceOf: ConfigError, message: /DATABASE_DIRECT_URL: multi-host URL has a bad host/ });
});
