// `npm test` after the type check: one PostgreSQL for the run (embedded, or DATABASE_URL),
// migrated once into a template database that every test file clones; then ava.
import { spawn } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { pino } from 'pino';
import { startEmbeddedPostgres } from '../src/db/embedded.ts';
import { migrate } from '../src/db/migrate.ts';
import { runStatement } from './helpers/database.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const logger = pino({ level: 'warn' }, pino.destination(2));

const embedded = process.env.DATABASE_URL
  ? null
  : await startEmbeddedPostgres({ dataDir: path.join(root, '.data', `test-${process.pid}`), logger, ephemeral: true });
const adminUrl = embedded?.url ?? process.env.DATABASE_URL ?? '';
const template = `hookline_template_${process.pid}`;

const admin = (statement: string) => runStatement(adminUrl, statement);

let code = 1;
try {
  await admin(`create database ${template}`);
  const templateUrl = new URL(adminUrl);
  templateUrl.pathname = `/${template}`;
  await migrate(templateUrl.toString(), logger);
  code = await new Promise<number>((resolve) => {
    // ava runs in a process group of its own, and so does every server a test starts: when a
    // test times out, ava exits without its teardowns, and the group is how the servers it left
    // running are found and stopped, instead of living on and loading the machine.
    const ava = spawn(process.execPath, [path.join(root, 'node_modules/ava/entrypoints/cli.js'), ...process.argv.slice(2)], {
      stdio: 'inherit',
      detached: true,
      // NODE_COMPILE_CACHE: Node's compile cache keeps the type-stripped, compiled modules, so
      // the ~160 test processes, and the servers, workers and CLIs they start, do not each strip
      // and compile src/ and its packages again (importing the web and the worker: 1.3-1.6 s of
      // CPU without it, 0.8 s with it). Node writes each entry to a temporary file and renames it, so
      // concurrent processes share the directory safely; an entry is used only for the same
      // source text.
      env: {
        ...process.env, TEST_ADMIN_DATABASE_URL: adminUrl, TEST_TEMPLATE_DATABASE: template,
        NODE_COMPILE_CACHE: process.env.NODE_COMPILE_CACHE ?? path.join(root, '.data', 'compile-cache'),
      },
    });
    const killGroup = (signal: NodeJS.Signals) => {
      try {
        if (ava.pid) process.kill(-ava.pid, signal);
      } catch {
        // the group is already empty
      }
    };
    for (const signal of ['SIGINT', 'SIGTERM'] as const) process.on(signal, () => killGroup(signal));
    ava.on('exit', (exitCode, signal) => {
      // A crash (SIGSEGV, SIGABRT) or a kill ends ava without its summary: say which, or the
      // log just stops and CI only sees the exit code.
      if (signal) console.error(`ava ended by ${signal}, without its summary`);
      killGroup('SIGKILL');
      resolve(exitCode ?? (signal ? 1 : 0));
    });
  });
} finally {
  await admin(`drop database if exists ${template} with (force)`).catch(() => {});
  await embedded?.stop();
}
process.exit(code);
