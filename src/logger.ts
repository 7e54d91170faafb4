// One pino logger per process; JSON lines on stdout.
import { pino, type Logger } from 'pino';

export type { Logger };

export function makeLogger(level: string): Logger {
  return pino({ level, base: { pid: process.pid }, timestamp: pino.stdTimeFunctions.isoTime });
}

/**
 * `act`, run at most once in any `intervalMs` for each value of its first argument (the
 * organization a warning names; the calls in between do nothing): a warning a busy path would
 * otherwise log on every call. Per value, not per process: one organization's warning left every
 * other organization's unlogged for the rest of the minute (a probe). Values not seen for an
 * interval are forgotten.
 */
export function atMostEvery<K, A extends unknown[]>(intervalMs: number, act: (key: K, ...args: A) => void): (key: K, ...args: A) => void {
  const at = new Map<K, number>();
  let prunedAt = performance.now();
  return (key, ...args) => {
    const now = performance.now();
    if (now - (at.get(key) ?? Number.NEGATIVE_INFINITY) < intervalMs) return;
    at.delete(key); // insertion order stays the order of the last acts
    at.set(key, now);
    act(key, ...args);
    if (now - prunedAt < intervalMs) return;
    prunedAt = now;
    for (const [seen, when] of at) {
      if (now - when < intervalMs) break;
      at.delete(seen);
    }
  };
}
