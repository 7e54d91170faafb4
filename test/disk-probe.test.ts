// The bench's disk probe (bench/disk-probe.ts), which the latency phase runs beside its load so
// that a slow second can be told from a slow disk: its summary of sync times, and the probe
// itself, run for real on this machine's disk (no figure asserted: the disk's speed is not ours).
import { mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import test from 'ava';
import { probeDisk, STALL_MS, summarize } from '../bench/disk-probe.ts';

test('the summary gives the quantiles, each stall with its second, and the longest sync of every second', (t) => {
  const samples: Array<[number, number]> = [[0, 1], [40, 2], [1_020, 80], [1_500, 3], [3_100, 0.5]];
  const summary = summarize(samples, 50);
  t.like(summary, { every_ms: 50, syncs: 5, p50_ms: 2, max_ms: 80 });
  t.is(summary.p99_ms, 80);
  t.deepEqual(summary.stalls, [[1, 80]]);
  // Second 2 had no sync begun in it: 0, so that the array's index is the second.
  t.deepEqual(summary.max_ms_by_second, [2, 80, 0, 0.5]);
  t.true(STALL_MS < 80);
  t.deepEqual(summarize([], 50), { every_ms: 50, syncs: 0, p50_ms: 0, p99_ms: 0, max_ms: 0, stalls: [], max_ms_by_second: [] });
});

test('the probe syncs a file in the directory it is given until stopped, then removes it', async (t) => {
  const dir = await mkdtemp(path.join(tmpdir(), 'disk-probe-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const startedAt = Date.now();
  const probe = probeDisk(dir, startedAt, 10);
  // Its file appears once the worker thread has started (not timed: a busy machine starts it late).
  while ((await readdir(dir)).length === 0) await new Promise((resolve) => setTimeout(resolve, 20));
  t.is((await readdir(dir)).length, 1);
  await new Promise((resolve) => setTimeout(resolve, 100));
  const syncs = await probe.stop();
  if (!syncs) return t.fail('the probe measured nothing');
  // At least the first sync, made before the probe listens for the stop (one sync can take a
  // second on this disk, so no more is counted on).
  t.true(syncs.syncs >= 1, `${syncs.syncs} syncs`);
  t.true(syncs.p50_ms <= syncs.max_ms);
  t.is(Math.max(...syncs.max_ms_by_second), syncs.max_ms);
  t.deepEqual(await readdir(dir), []);
});

test('a probe that cannot write answers null, and the run it is part of goes on', async (t) => {
  const dir = await mkdtemp(path.join(tmpdir(), 'disk-probe-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  // A file where the probe's directory should be: mkdir fails in the worker thread.
  const notADirectory = path.join(dir, 'file');
  await writeFile(notADirectory, '');
  const probe = probeDisk(path.join(notADirectory, 'probe'), Date.now(), 10);
  t.is(await probe.stop(), null);
});
