// `npm test`: one PostgreSQL for the run (embedded, or DATABASE_URL), migrated once into a
// template database that every test file clones; then ava. With --typecheck (npm test), the type
// check runs beside them.
import { spawn } from 'node:child_process';
import { accessSync, constants, mkdirSync, readdirSync, rmSync, statfsSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { pino } from 'pino';
import { isAlive, startEmbeddedPostgres } from '../src/db/embedded.ts';
import { migrate } from '../src/db/migrate.ts';
import { runStatement } from './helpers/database.ts';
import { aggregateOf } from './helpers/modules.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const logger = pino({ level: 'warn' }, pino.destination(2));

// --typecheck: `tsc --noEmit` in a process of its own, from the start, beside the database's start
// and the tests. Before them (`tsc --noEmit && node test/run.ts`), it held one core for about 40
// s of a run while the other idled (its 39 s of CPU in a 17-minute run, perf). A type error
// stops the tests as soon as tsc reports it, and fails the run as before.
let stopTests: (() => void) | undefined;
let typecheckFailed = false;
const typecheck = process.argv.includes('--typecheck') ? new Promise<number>((resolve) => {
  const tsc = spawn(process.execPath, [path.join(path.dirname(createRequire(import.meta.url).resolve('typescript')), '../bin/tsc'), '--noEmit'], {
    cwd: root, stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  tsc.stdout.on('data', (chunk: Buffer) => { output += chunk.toString(); });
  tsc.stderr.on('data', (chunk: Buffer) => { output += chunk.toString(); });
  tsc.on('close', (code, signal) => {
    const exit = code ?? (signal ? 1 : 0);
    if (exit !== 0) {
      typecheckFailed = true;
      console.error(`${output}\ntsc --noEmit failed (exit ${exit}): the tests are stopped`);
      stopTests?.();
    }
    resolve(exit);
  });
}) : null;

// The run's scratch space: the test cluster, the clusters and DATA_DIRs tests make, and TMPDIR
// (Chromium's profiles, temporary files). In memory (/dev/shm) where there is a tmpfs: the suite
// creates and removes tens of thousands of files (a database of ~1,000 files cloned and dropped
// per test file, initdbs, profiles), and on this machine's ext4, mounted without a journal, each
// file created after many removals cost the kernel a walk over the recently freed inodes
// (`recently_deleted()` in ext4_create: a CREATE DATABASE took 60-800 ms of CPU, mostly there).
// It held about 400 MB at its peak: a tmpfs with less than 2 GiB free (a container's 64 MB
// /dev/shm) is not used. TEST_SCRATCH_PARENT puts it elsewhere (`.data` for the disk). A run
// killed before its end leaves its directory: the next run removes those whose process is gone.
const TMPFS_MAGIC = 0x01021994;
const TMPFS_MIN_FREE = 2 * 1024 ** 3;
function scratchParent(): string {
  if (process.env.TEST_SCRATCH_PARENT) return path.resolve(process.env.TEST_SCRATCH_PARENT);
  try {
    accessSync('/dev/shm', constants.W_OK);
    const shm = statfsSync('/dev/shm');
    if (shm.type === TMPFS_MAGIC && shm.bavail * shm.bsize >= TMPFS_MIN_FREE) return '/dev/shm';
  } catch {
    // no /dev/shm, or not ours to write
  }
  return path.join(root, '.data');
}
const parent = scratchParent();
mkdirSync(parent, { recursive: true });
for (const name of readdirSync(parent)) {
  const pid = Number(/^hookline-test-(\d+)$/.exec(name)?.[1]);
  if (pid && pid !== process.pid && !isAlive(pid)) rmSync(path.join(parent, name), { recursive: true, force: true });
}
const scratch = path.join(parent, `hookline-test-${process.pid}`);
mkdirSync(path.join(scratch, 'tmp'), { recursive: true, mode: 0o755 });

const embedded = process.env.DATABASE_URL
  ? null
  : await startEmbeddedPostgres({ dataDir: path.join(scratch, 'cluster'), logger, ephemeral: true,
    // A test file of a directory runs with the rest of the directory (test/helpers/modules.ts):
    // a dozen test apps of one process, with their pools, may be busy at once.
    settings: { max_connections: '400' } });
const adminUrl = embedded?.url ?? process.env.DATABASE_URL ?? '';
const template = `hookline_template_${process.pid}`;

const admin = (statement: string) => runStatement(adminUrl, statement);

// The files of a directory of test/ run in one process, through test/<directory>.test.ts
// (test/helpers/modules.ts): given such a file, or the directory, ava gets that file, and
// TEST_MODULES the files asked for (none: all of them).
const modules: string[] = [];
const avaArguments = process.argv.slice(2).filter((argument) => argument !== '--typecheck').map((argument) => {
  const aggregated = aggregateOf(argument);
  if (!aggregated) return argument;
  if (aggregated.file) modules.push(aggregated.file);
  return aggregated.aggregate;
}).filter((argument, i, all) => !argument.endsWith('.test.ts') || all.indexOf(argument) === i);

let code = 1;
try {
  await admin(`create database ${template}`);
  const templateUrl = new URL(adminUrl);
  templateUrl.pathname = `/${template}`;
  await migrate(templateUrl.toString(), logger);
  code = typecheckFailed ? 1 : await new Promise<number>((resolve) => {
    // ava runs in a process group of its own, and so does every server a test starts: when a
    // test times out, ava exits without its teardowns, and the group is how the servers it left
    // running are found and stopped, instead of living on and loading the machine.
    const ava = spawn(process.execPath, [path.join(root, 'node_modules/ava/entrypoints/cli.js'), ...avaArguments], {
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
        TEST_SCRATCH_DIR: scratch, TMPDIR: path.join(scratch, 'tmp'), TEST_MODULES: modules.join(','),
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
    stopTests = () => killGroup('SIGTERM');
    ava.on('exit', (exitCode, signal) => {
      // A crash (SIGSEGV, SIGABRT) or a kill ends ava without its summary: say which, or the
      // log just stops and CI only sees the exit code.
      if (signal) console.error(`ava ended by ${signal}, without its summary`);
      killGroup('SIGKILL');
      resolve(exitCode ?? (signal ? 1 : 0));
    });
  });
  if (typecheck) {
    if (await typecheck === 0) console.log('tsc --noEmit: no type errors');
    else code = 1;
  }
} finally {
  await admin(`drop database if exists ${template} with (force)`).catch(() => {});
  await embedded?.stop();
  rmSync(scratch, { recursive: true, force: true });
}
process.exit(code);
