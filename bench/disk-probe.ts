// `npm run bench:disk [seconds]`: how long this machine's disk takes to make a small write
// durable, the wait every synchronous commit has (the WAL's flush). Every PROBE_EVERY_MS (default
// 50) a worker thread overwrites 8 KB of one file and fdatasync()s it, and times the two; alone
// (default 60 s) it prints the distribution and each sync over 50 ms by the second it began in.
// The bench (bench/run.ts) runs the same probe beside its latency phase, in the cluster's data
// directory, so that a slow second of the phase can be told from a slow disk: a job's
// created_at is stamped before its accept commits, and no worker sees the job before that
// commit's flush, so a flush held up for 300 ms holds up every first attempt of those 300 ms
// (at 300 jobs/s, 90 jobs: past the p99 of a 20-second phase on its own).
// The probe adds one small flush per 50 ms to the disk's load (the latency phase's accepts
// flush about 185 times a second at 300 jobs/s: one commit per group of about 1.6 jobs).
import { closeSync, fdatasyncSync, mkdirSync, openSync, rmSync, writeSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { isMainThread, parentPort, Worker, workerData } from 'node:worker_threads';
import { percentile } from './percentile.ts';

/** A stall: a sync that took over this long. */
export const STALL_MS = 50;

export type DiskSyncs = {
  every_ms: number;
  syncs: number;
  p50_ms: number;
  p99_ms: number;
  max_ms: number;
  /** Each sync over STALL_MS: the second (from the start) it began in, and its milliseconds. */
  stalls: Array<[number, number]>;
  /** The longest sync begun in each second from the start (0 when none was). */
  max_ms_by_second: number[];
};

type Sample = [startedMs: number, tookMs: number];

/** The distribution of `samples` (start from the probe's start, duration), as DiskSyncs. */
export function summarize(samples: Sample[], everyMs: number): DiskSyncs {
  const sorted = samples.map(([, took]) => took).sort((a, b) => a - b);
  const round = (ms: number) => +ms.toFixed(2);
  const bySecond: number[] = [];
  for (const [at, took] of samples) {
    const second = Math.floor(at / 1000);
    for (let s = bySecond.length; s <= second; s += 1) bySecond.push(0);
    bySecond[second] = Math.max(bySecond[second] ?? 0, round(took));
  }
  return {
    every_ms: everyMs, syncs: samples.length,
    p50_ms: round(percentile(sorted, 50)), p99_ms: round(percentile(sorted, 99)), max_ms: round(sorted.at(-1) ?? 0),
    stalls: samples.filter(([, took]) => took > STALL_MS).map(([at, took]) => [Math.floor(at / 1000), Math.round(took)]),
    max_ms_by_second: bySecond,
  };
}

/**
 * Starts the probe in `dir` (created if missing; its file removed at the end), one sync every
 * `everyMs`. `stop()` ends it and returns what it measured; seconds count from `startedAt`
 * (epoch milliseconds; the call by default), so that they line up with other samplers'. A probe
 * that failed (the directory not writable, say) answers null, with the reason on stderr: the
 * disk is context for a bench run, not a reason to lose it.
 */
export function probeDisk(dir: string, startedAt = Date.now(), everyMs = Number(process.env.PROBE_EVERY_MS ?? 50)) {
  const worker = new Worker(new URL(import.meta.url), { workerData: { dir, startedAt, everyMs } });
  const done = new Promise<Sample[]>((resolve, reject) => {
    worker.once('message', resolve);
    worker.once('error', reject);
    worker.once('exit', (code) => reject(new Error(`the disk probe exited (${code}) before it answered`)));
  });
  // Observed here so that a failure before stop() is no unhandled rejection.
  const outcome = done.then((samples) => ({ samples }), (error: unknown) => ({ error }));
  return {
    async stop(): Promise<DiskSyncs | null> {
      worker.postMessage('stop');
      const result = await outcome;
      await worker.terminate();
      if ('error' in result) {
        process.stderr.write(`disk probe: not measured (${result.error instanceof Error ? result.error.message : String(result.error)})\n`);
        return null;
      }
      return summarize(result.samples, everyMs);
    },
  };
}

/** The worker thread: syncs until told to stop, then answers with every sample. */
function runProbe(dir: string, startedAt: number, everyMs: number): void {
  mkdirSync(dir, { recursive: true });
  const file = path.join(dir, `disk-probe-${process.pid}`);
  const fd = openSync(file, 'w');
  const block = Buffer.alloc(8192, 1);
  const samples: Sample[] = [];
  let timer: NodeJS.Timeout | undefined;
  const step = () => {
    const begun = Date.now();
    const at = performance.now();
    writeSync(fd, block, 0, block.length, 0);
    fdatasyncSync(fd);
    samples.push([Math.max(0, begun - startedAt), performance.now() - at]);
    timer = setTimeout(step, everyMs);
  };
  parentPort?.once('message', () => {
    clearTimeout(timer);
    closeSync(fd);
    rmSync(file, { force: true });
    parentPort?.postMessage(samples);
  });
  step();
}

if (!isMainThread && (workerData as { dir?: string } | null)?.dir) {
  const { dir, startedAt, everyMs } = workerData as { dir: string; startedAt: number; everyMs: number };
  runProbe(dir, startedAt, everyMs);
} else if (isMainThread && process.argv[1] === fileURLToPath(import.meta.url)) {
  const seconds = Number(process.argv[2] ?? 60);
  const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
  const probe = probeDisk(path.join(root, '.data'));
  await new Promise((resolve) => setTimeout(resolve, seconds * 1000));
  const syncs = await probe.stop();
  if (!syncs) process.exit(1);
  console.log(`disk syncs (8 KB write + fdatasync, every ${syncs.every_ms} ms) over ${seconds} s: ${syncs.syncs}`);
  console.log(`p50 ${syncs.p50_ms} ms, p99 ${syncs.p99_ms} ms, max ${syncs.max_ms} ms`);
  console.log(`over ${STALL_MS} ms: ${syncs.stalls.length}${syncs.stalls.length ? ` (second: ms) ${syncs.stalls.map(([s, ms]) => `${s}: ${ms}`).join(', ')}` : ''}`);
}
