// Our own entry points run as real child processes (on the Node that runs the tests).
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

/**
 * Where tests put the clusters and DATA_DIRs they make: the run's scratch directory (test/run.ts:
 * in memory where there is a tmpfs), else the project's .data/.
 */
export const SCRATCH = process.env.TEST_SCRATCH_DIR ?? path.join(ROOT, '.data');

export type Started = {
  child: ChildProcess;
  stdout: () => string;
  stderr: () => string;
  /** Resolves with the first JSON log line matching `test`; rejects after `timeoutMs`. */
  waitForLog(test: (line: Record<string, unknown>) => boolean, timeoutMs?: number): Promise<Record<string, unknown>>;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
};

/** How long a start may take before a test gives up on its log line (a busy 2-core machine). */
export const STARTUP_TIMEOUT_MS = 240_000;

/**
 * A clean environment: only what the child needs, nothing inherited that names a database. The
 * run's compile cache (test/run.ts) goes along: without it each server, worker and CLI a test
 * starts compiled src/ and its packages again (0.8 s more CPU for a web and worker, 0.3 s for the CLI).
 */
export function childEnv(env: Record<string, string>): Record<string, string> {
  return {
    PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp', LOG_LEVEL: 'info',
    ...(process.env.NODE_COMPILE_CACHE ? { NODE_COMPILE_CACHE: process.env.NODE_COMPILE_CACHE } : {}),
    ...env,
  };
}

export function startScript(script: string, args: string[], env: Record<string, string>): Started {
  const child = spawn(process.execPath, [script, ...args], { cwd: ROOT, env: childEnv(env) });
  let out = '';
  let err = '';
  const waiters: Array<() => void> = [];
  child.stdout.on('data', (chunk: Buffer) => {
    out += chunk.toString();
    for (const wake of waiters) wake();
  });
  child.stderr.on('data', (chunk: Buffer) => {
    err += chunk.toString();
  });
  // 'exit' can come before the last chunks of stdout are read: a missing log line is only
  // final once stdout has closed too.
  let stdoutClosed = false;
  child.stdout.on('close', () => {
    stdoutClosed = true;
    for (const wake of waiters) wake();
  });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
    child.on('exit', (code, signal) => {
      for (const wake of waiters) wake();
      resolve({ code, signal });
    });
  });
  const findLog = (test: (line: Record<string, unknown>) => boolean) => {
    for (const text of out.split('\n').slice(0, -1)) { // complete lines only
      if (!text.startsWith('{')) continue;
      const line = JSON.parse(text) as Record<string, unknown>;
      if (test(line)) return line;
    }
    return null;
  };
  return {
    child,
    stdout: () => out,
    stderr: () => err,
    exited,
    // The default wait is for a start: loading the modules and the migration check take
    // seconds, and on a busy shared machine over 30 s. Tests wait for the line, never time it.
    waitForLog: (test, timeoutMs = STARTUP_TIMEOUT_MS) => new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no such log line within ${timeoutMs} ms:\n${out}\n${err}`)), timeoutMs);
      const check = () => {
        const line = findLog(test);
        if (line) {
          clearTimeout(timer);
          resolve(line);
        } else if (stdoutClosed && (child.exitCode !== null || child.signalCode !== null)) {
          clearTimeout(timer);
          reject(new Error(`process exited before the log line:\n${out}\n${err}`));
        }
      };
      waiters.push(check);
      check();
    }),
  };
}

/** Runs a script to completion. */
export async function runScript(script: string, args: string[], env: Record<string, string>) {
  const started = startScript(script, args, env);
  // 'close', not 'exit': only then has all of stdout and stderr been read (after 'exit' the
  // last chunks may still be on their way, and a usage message was sometimes missing).
  const closed = new Promise((resolve) => started.child.once('close', resolve));
  const { code } = await started.exited;
  await closed;
  return { code, stdout: started.stdout(), stderr: started.stderr() };
}

/**
 * GET /health of a started process until it answers 200 (returned with its body), or the last
 * answer after `timeoutMs`. A 503 only says the database took over 2 s, which a busy shared
 * machine can make happen; the tests that call this check that the process serves, not how fast.
 */
export async function healthy(baseUrl: string, timeoutMs = STARTUP_TIMEOUT_MS): Promise<{ status: number; body: unknown }> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    // Its cause said: a bare "fetch failed" (a refused connection? a reset?) is all a failure
    // under load once left to go on.
    const res = await fetch(`${baseUrl}/health`).catch((error: unknown) => {
      throw new Error(`GET ${baseUrl}/health: ${String((error as { cause?: unknown }).cause ?? error)}`, { cause: error });
    });
    const answer = { status: res.status, body: await res.json() as unknown };
    if (answer.status === 200 || Date.now() > deadline) return answer;
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

/**
 * Sends `signal` to one process. A pid read from a file being written (postmaster.pid between its
 * creation and its first line) is 0, and process.kill(0) signals the caller's whole process
 * group: ava, every test file and every server they started. Refused instead.
 */
export function signalPid(pid: number, signal: NodeJS.Signals): void {
  if (!Number.isInteger(pid) || pid <= 0) throw new Error(`not a process id: ${pid}`);
  process.kill(pid, signal);
}
