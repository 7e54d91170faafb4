import { readFileSync } from 'node:fs';
import path from 'node:path';
import test from 'ava';
import { ConfigError, loadConfig } from '../src/config.ts';
import { attemptLimitMs } from '../src/worker/delivery-loop.ts';
import { ROOT } from './helpers/process.ts';

test('defaults match decisions section 1', (t) => {
  const config = loadConfig({});
  t.is(config.port, 3000);
  t.is(config.databaseUrl, undefined);
  t.false(config.allowPrivateDestinations);
  t.deepEqual(config.retrySchedule, [5, 300, 1800, 7200, 18000, 36000]);
  t.is(config.circuitBreakerThreshold, 10);
  t.is(config.circuitBreakerCooldown, 300);
  t.is(config.dataDir, '.data');
  t.is(config.databaseIdleTimeoutMs, 600_000, 'idle connections are kept ten minutes (docs/deploy.md)');
  t.is(config.databaseStatementTimeoutMs, 30_000);
  t.true(Object.isFrozen(config));
});

test('values are read and converted', (t) => {
  const config = loadConfig({
    PORT: '8080', DATABASE_URL: 'postgres://u:p@db:5432/x', ALLOW_PRIVATE_DESTINATIONS: 'true',
    RETRY_SCHEDULE: '1, 2,3,4,5,6', CIRCUIT_BREAKER_THRESHOLD: '3', CIRCUIT_BREAKER_COOLDOWN: '60',
  });
  t.is(config.port, 8080);
  t.is(config.databaseUrl, 'postgres://u:p@db:5432/x');
  t.true(config.allowPrivateDestinations);
  t.deepEqual(config.retrySchedule, [1, 2, 3, 4, 5, 6]);
  t.is(config.circuitBreakerThreshold, 3);
  t.is(config.circuitBreakerCooldown, 60);
});

test('an empty variable counts as unset', (t) => {
  t.is(loadConfig({ PORT: '' }).port, 3000);
});

const bad: Array<[string, string]> = [
  ['PORT', 'abc'],
  ['PORT', '70000'],
  ['DATABASE_URL', 'mysql://x'],
  ['DATABASE_POOL_SIZE', '0'],
  ['DATABASE_IDLE_TIMEOUT_MS', '500'],
  ['DATABASE_IDLE_TIMEOUT_MS', '3600001'],
  ['DATABASE_STATEMENT_TIMEOUT_MS', '999'],
  ['DATABASE_STATEMENT_TIMEOUT_MS', '600001'],
  ['ALLOW_PRIVATE_DESTINATIONS', 'yes'],
  ['RETRY_SCHEDULE', '5,300'],
  ['RETRY_SCHEDULE', '5,300,1800,7200,18000,-1'],
  ['RETRY_SCHEDULE', 'a,b,c,d,e,f'],
  ['CIRCUIT_BREAKER_THRESHOLD', '0'],
  ['CIRCUIT_BREAKER_COOLDOWN', '3601'],
  ['CIRCUIT_BREAKER_COOLDOWN', '1.5'],
  ['LOG_LEVEL', 'loud'],
];

for (const [name, value] of bad) {
  test(`${name}=${value} is refused with a message naming the variable`, (t) => {
    const error = t.throws(() => loadConfig({ [name]: value }), { instanceOf: ConfigError });
    t.regex(error?.message ?? '', new RegExp(`\\b${name}\\b`));
  });
}

// A probe: DATABASE_POOL_SIZE=-5 was told "must be a whole number", which it is; the message now
// gives the range, and a negative number the bound it missed.
test('a number outside its range is told the range: a negative one too', (t) => {
  t.regex(t.throws(() => loadConfig({ DATABASE_POOL_SIZE: '-5' }))?.message ?? '', /DATABASE_POOL_SIZE: must be at least 1\b/);
  t.regex(t.throws(() => loadConfig({ DATABASE_POOL_SIZE: 'ten' }))?.message ?? '', /DATABASE_POOL_SIZE: must be a whole number from 1 to 200\b/);
  t.regex(t.throws(() => loadConfig({ PORT: '99999999999999999999' }))?.message ?? '', /PORT: must be at most 65535\b/);
  t.is(loadConfig({ SHUTDOWN_TIMEOUT_MS: '-0' }).shutdownTimeoutMs, 0);
});

// Attempts are cut at the lease less 5 s: from 2 to 6 s that would be nothing, and the worker
// cuts them at 1 s instead (short leases serve tests: test/retention.test.ts runs on 2 s). The
// README said only 'the lease minus 5 s', and no range.
test('DELIVERY_LEASE_SECONDS: 2–3600; attempts cut at the lease less 5 s but at least 1 s, as the README says', (t) => {
  t.is(loadConfig({}).deliveryLeaseSeconds, 180);
  t.is(loadConfig({ DELIVERY_LEASE_SECONDS: '2' }).deliveryLeaseSeconds, 2);
  t.is(loadConfig({ DELIVERY_LEASE_SECONDS: '3600' }).deliveryLeaseSeconds, 3600);
  for (const value of ['1', '3601']) {
    t.throws(() => loadConfig({ DELIVERY_LEASE_SECONDS: value }), { instanceOf: ConfigError, message: /DELIVERY_LEASE_SECONDS/ });
  }
  t.deepEqual([2, 5, 6, 7, 180].map(attemptLimitMs), [1000, 1000, 1000, 2000, 175_000]);
  const row = readFileSync(path.join(ROOT, 'README.md'), 'utf8').split('\n').find((line) => line.startsWith('| `DELIVERY_LEASE_SECONDS` |'));
  t.regex(row ?? '', /2–3600/);
  t.regex(row ?? '', /lease minus 5 s, but at least 1 s \(so at 6 or less every attempt is cut at 1 s/);
});
