// The database server's CPU use, read from /proc, for the benches' CPU-per-unit figures.
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import type pg from 'pg';
import { cpuSeconds } from './ab.ts';

/**
 * The database server's CPU seconds so far: its postmaster and every backend and helper process
 * (children that exited count through the postmaster's cutime/cstime). null when the server is
 * not a process of this machine that /proc shows (a DATABASE_URL elsewhere).
 */
export async function databaseCpuSeconds(postmasterPid: number | null): Promise<number | null> {
  if (postmasterPid === null) return null;
  const fields = async (pid: string) => (await readFile(`/proc/${pid}/stat`, 'utf8')).split(') ')[1]?.split(' ') ?? [];
  try {
    const own = await fields(String(postmasterPid));
    let ticks = Number(own[11]) + Number(own[12]) + Number(own[13]) + Number(own[14]);
    // The postmaster's children from its own list (Linux 3.5+, CONFIG_PROC_CHILDREN), else every
    // process of /proc: a bench that samples this every half second spent a fifth of its CPU
    // reading all of /proc.
    const children = await readFile(`/proc/${postmasterPid}/task/${postmasterPid}/children`, 'utf8')
      .then((text) => text.split(' ').filter((pid) => pid.trim() !== ''), () => null);
    for (const entry of children ?? await readdir('/proc')) {
      if (!/^\d+$/.test(entry)) continue;
      const stat = await fields(entry).catch(() => null); // a process that ended meanwhile
      if (stat && Number(stat[1]) === postmasterPid) ticks += Number(stat[11]) + Number(stat[12]);
    }
    return ticks / 100;
  } catch {
    return null;
  }
}

/** CPU µs per unit of work from two readings, or null when either is missing. */
export const cpuPer = (before: number | null, after: number | null, units: number) =>
  before === null || after === null ? null : Math.round(((after - before) * 1e6) / Math.max(1, units));

/** The postmaster's pid, from postmaster.pid in the server's data directory, when this machine can read it. */
export async function postmasterPidOf(db: pg.Client): Promise<number | null> {
  try {
    const dir = (await db.query<{ setting: string }>(`select setting from pg_settings where name = 'data_directory'`)).rows[0]?.setting;
    if (!dir) return null;
    const pid = Number((await readFile(path.join(dir, 'postmaster.pid'), 'utf8')).split('\n')[0]);
    return Number.isInteger(pid) && pid > 0 ? pid : null;
  } catch {
    return null;
  }
}

/**
 * The cores each process, then the database server (all its processes), used in every half
 * second until `stop()` (where a slow stretch of the phase, its first second after a pause,
 * spent the machine), and over the whole span. A last stretch shorter than a quarter second is
 * left out of the halves (the CPU times count in 10 ms ticks).
 */
export function sampleCores(pids: number[], postmasterPid: number | null) {
  const read = async () => [...await Promise.all(pids.map((pid) => cpuSeconds(pid).catch(() => 0))), await databaseCpuSeconds(postmasterPid) ?? 0];
  const samples: Array<{ at: number; cpu: number[] }> = [];
  const take = async () => { const at = performance.now(); samples.push({ at, cpu: await read() }); };
  const cores = (a: { at: number; cpu: number[] }, b: { at: number; cpu: number[] }) =>
    b.cpu.map((x, j) => +((x - a.cpu[j]!) / ((b.at - a.at) / 1000)).toFixed(2));
  const started = take();
  const timer = setInterval(() => void take(), 500);
  return {
    async stop(): Promise<{ halves: number[][]; overall: number[] }> {
      clearInterval(timer);
      await started;
      await take();
      samples.sort((a, b) => a.at - b.at);
      return {
        halves: samples.slice(1).flatMap((b, i) => (b.at - samples[i]!.at < 250 ? [] : [cores(samples[i]!, b)])),
        overall: cores(samples[0]!, samples.at(-1)!),
      };
    },
  };
}
