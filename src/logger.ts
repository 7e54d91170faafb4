// One pino logger per process; JSON lines on stdout.
import { pino, type Logger } from 'pino';

export type { Logger };

export function makeLogger(level: string): Logger {
  return pino({ level, base: { pid: process.pid }, timestamp: pino.stdTimeFunctions.isoTime });
}

/** `act`, run at most once in any `intervalMs` (the calls in between do nothing): a warning a busy path would otherwise log on every call. */
export function atMostEvery<A extends unknown[]>(intervalMs: number, act: (...args: A) => void): (...args: A) => void {
  let at = Number.NEGATIVE_INFINITY;
  return (...args) => {
    const now = performance.now();
    if (now - at < intervalMs) return;
    at = now;
    act(...args);
  };
}
