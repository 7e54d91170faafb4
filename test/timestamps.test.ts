import test from 'ava';
import { parseTimestamptz } from '../src/db/timestamps.ts';

test('timestamptz text becomes ISO 8601 UTC with milliseconds, truncated', (t) => {
  t.is(parseTimestamptz('2026-11-22 10:00:00.123956+00'), '2026-11-22T10:00:00.123Z');
  t.is(parseTimestamptz('2026-11-22 10:00:00+00'), '2026-11-22T10:00:00.000Z');
  t.is(parseTimestamptz('2026-11-22 10:00:00.57+05:30'), '2026-11-22T04:30:00.570Z');
  t.is(parseTimestamptz('2026-11-22 10:00:00.5-03'), '2026-11-22T13:00:00.500Z');
  t.is(parseTimestamptz('1880-01-01 00:00:00+00:09:21'), '1879-12-31T23:50:39.000Z');
  t.is(parseTimestamptz('0099-01-01 00:00:00+00'), '0099-01-01T00:00:00.000Z');
});
