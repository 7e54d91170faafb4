// Identifiers: a prefix and a KSUID whose random part is cut from a pool of random bytes.
import test from 'ava';
import KSUID from 'ksuid';
import { randomBytes } from 'node:crypto';
import { isId, ksuidString, newId } from '../src/ids.ts';

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

test('ids are written as KSUID itself writes the same 20 bytes, at the ends of the range and with leading zero bytes', (t) => {
  const raws = [
    Buffer.alloc(20), Buffer.alloc(20, 0xff), Buffer.concat([Buffer.alloc(1), Buffer.alloc(19, 0xff)]),
    Buffer.concat([Buffer.alloc(5), randomBytes(15)]), Buffer.concat([Buffer.alloc(19), Buffer.from([1])]),
    ...Array.from({ length: 2000 }, () => randomBytes(20)),
  ];
  for (const raw of raws) t.is(ksuidString(raw), KSUID.fromParts(raw.readUInt32BE(0) * 1000 + 14e11, raw.subarray(4)).string, raw.toString('hex'));
  const id = newId('job');
  t.is(KSUID.parse(id.slice('job_'.length)).string, id.slice('job_'.length), 'a new id reads back as the same KSUID');
});
