// For test/embedded.test.ts: a process that starts the embedded PostgreSQL of DATA_DIR as its
// owner, logs `started`, and exits without stopping it (as an uncaught error would end a
// process) once the file named by its first argument exists.
import { existsSync } from 'node:fs';
import { pino } from 'pino';
import { startEmbeddedPostgres } from '../../src/db/embedded.ts';

const logger = pino();
await startEmbeddedPostgres({ dataDir: process.env.DATA_DIR!, logger });
logger.info('started');
const signal = process.argv[2]!;
const timer = setInterval(() => { if (existsSync(signal)) { clearInterval(timer); process.exit(1); } }, 50);
