// One pino logger per process; JSON lines on stdout.
import { pino, type Logger } from 'pino';

export type { Logger };

export function makeLogger(level: string): Logger {
  return pino({ level, base: { pid: process.pid }, timestamp: pino.stdTimeFunctions.isoTime });
}
