// Identifiers: a prefix and a KSUID whose random part is cut from a pool of random bytes.
import test from 'ava';
import KSUID from 'ksuid';
import { isId, newId } from '../src/ids.ts';

test('ids across several refills of the random pool are all well-formed, distinct in their random part, and stamped now', (t) => {
  const before = Math.floor(Date.now() / 1000) * 1000;
  const ids = Array.from({ length: 1000 }, () => newId('job'));
  const after = Date.now();
  t.true(ids.every((id) => isId('job', id)), 'every id is job_ and a 27-character KSUID');
  const parsed = ids.map((id) => KSUID.parse(id.slice('job_'.length)));
  t.is(new Set(parsed.map((k) => k.payload.toString('hex'))).size, ids.length, 'no two ids share their 16 random bytes');
  t.true(parsed.every((k) => k.date.getTime() >= before && k.date.getTime() <= after), 'each is stamped with the time it was made');
  // Not a run of zeros or repeats: the bytes of all payloads together take many values.
  t.true(new Set(parsed.flatMap((k) => [...k.payload])).size > 200);
});
