import test from 'ava';
import { nextAttemptAt } from '../src/worker/retry-policy.ts';

const schedule = [5, 300, 1800, 7200, 18000, 36000];
const now = new Date('2026-11-22T10:00:00.000Z');
const expiresAt = new Date(now.getTime() + 48 * 3600_000);
const base = { schedule, now, expiresAt, retryAfterSeconds: null, random: 0 };

test('each failed attempt waits its step of the schedule', (t) => {
  schedule.forEach((seconds, i) => {
    t.is(nextAttemptAt({ ...base, attempt: i + 1 })?.getTime(), now.getTime() + seconds * 1000);
  });
});

test('after the 7th attempt (1 + 6 retries) there is none', (t) => {
  t.is(nextAttemptAt({ ...base, attempt: 7 }), null);
});

test('jitter adds up to 10%, never less than the step', (t) => {
  t.is(nextAttemptAt({ ...base, attempt: 2, random: 0.999 })?.getTime(), now.getTime() + 300 * 1000 * 1.0999);
  t.is(nextAttemptAt({ ...base, attempt: 2, random: 0.5 })?.getTime(), now.getTime() + 315 * 1000);
});

test('Retry-After is a floor, not a ceiling', (t) => {
  t.is(nextAttemptAt({ ...base, attempt: 1, retryAfterSeconds: 120 })?.getTime(), now.getTime() + 120_000);
  t.is(nextAttemptAt({ ...base, attempt: 2, retryAfterSeconds: 120 })?.getTime(), now.getTime() + 300_000);
});

test('no attempt is scheduled at or past the window', (t) => {
  const soon = new Date(now.getTime() + 5000);
  t.is(nextAttemptAt({ ...base, attempt: 1, expiresAt: soon }), null);
  t.truthy(nextAttemptAt({ ...base, attempt: 1, expiresAt: new Date(soon.getTime() + 1) }));
  t.is(nextAttemptAt({ ...base, attempt: 1, retryAfterSeconds: 49 * 3600 }), null);
});
