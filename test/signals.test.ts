// What a platform or a terminal does to `npm start`: SIGTERM to npm, or Ctrl-C (SIGINT to the
// whole foreground process group). Either way the whole tree stops: node and its embedded
// PostgreSQL, in order, with the final "stopped" line and no error records.
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import path from 'node:path';
import test from 'ava';
import { isAlive } from '../src/db/embedded.ts';
import { childEnv, healthy, ROOT, SCRATCH, signalPid } from './helpers/process.ts';

const dataDir = path.join(SCRATCH, `test-signals-${randomBytes(4).toString('hex')}`);
const leftovers: number[] = [];


test.after.always(async () => {
  for (const pid of leftovers) if (isAlive(pid)) signalPid(pid, 'SIGKILL');
  await rm(dataDir, { recursive: true, force: true });
});

/** `npm start` in a process group of its own (as a terminal's job or a container's PID 1 has). */
async function startTree() {
  const npm = spawn('npm', ['start'], { cwd: ROOT, env: childEnv({ DATA_DIR: dataDir, PORT: '0' }), detached: true });
  let out = '';
  npm.stdout.on('data', (chunk: Buffer) => {
    out += chunk.toString();
  });
  npm.stderr.on('data', (chunk: Buffer) => {
    out += chunk.toString();
  });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
    npm.on('exit', (code, signal) => resolve({ code, signal }));
  });
  const logs = () => out.split('\n').filter((text) => text.startsWith('{')).map((text) => JSON.parse(text) as Record<string, unknown>);
  for (let waited = 0; !logs().some((line) => line.msg === 'web listening'); waited += 100) {
    if (waited > 90_000 || npm.exitCode !== null) throw new Error(`npm start did not come up:\n${out}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  const nodePid = logs()[0]?.pid as number;
  const postgresPid = Number(readFileSync(path.join(dataDir, 'postgres', 'postmaster.pid'), 'utf8').split('\n')[0]);
  leftovers.push(nodePid, postgresPid);
  return { npm, exited, logs, nodePid, postgresPid, output: () => out };
}

async function goneWithin(pids: number[], ms: number): Promise<boolean> {
  for (let waited = 0; waited <= ms; waited += 100) {
    if (!pids.some(isAlive)) return true;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  return false;
}

const cases = [
  { name: 'SIGTERM to npm (a platform stopping the process it started)', send: (npmPid: number) => signalPid(npmPid, 'SIGTERM'), reason: 'SIGTERM' },
  { name: 'Ctrl-C (SIGINT to the whole process group)', send: (npmPid: number) => {
    if (!(npmPid > 0)) throw new Error(`not a process id: ${npmPid}`); // -0 would be ava's own group
    process.kill(-npmPid, 'SIGINT');
  }, reason: 'SIGINT' },
];

for (const { name, send, reason } of cases) {
  test.serial(`${name} stops node and PostgreSQL; "stopped" is logged, no error record`, async (t) => {
    t.timeout(5 * 60_000); // a first start (initdb) and a stop of node and PostgreSQL on a busy machine
    const tree = await startTree();
    t.true(isAlive(tree.nodePid) && isAlive(tree.postgresPid));
    // The script's allocator setting reached node through npm and sh (its default: none was set).
    t.regex(readFileSync(`/proc/${tree.nodePid}/environ`, 'utf8'), /(^|\0)MALLOC_ARENA_MAX=2\0/);
    // While it runs: a request's log line carries its latency rounded to the microsecond.
    const port = tree.logs().find((line) => line.msg === 'web listening')?.port as number;
    t.is((await healthy(`http://127.0.0.1:${port}`)).status, 200);
    let requestLine: string | undefined;
    for (let waited = 0; !requestLine && waited < 5000; waited += 50) {
      await new Promise((resolve) => setTimeout(resolve, 50));
      requestLine = tree.output().split('\n').find((text) => text.includes('"msg":"request"'));
    }
    t.regex(requestLine ?? '', /"latency_ms":\d+(\.\d{1,3})?,/);
    send(tree.npm.pid!);
    // npm waits for node, which stops its worker, pools and PostgreSQL before exiting 0.
    t.deepEqual(await tree.exited, { code: 0, signal: null }, tree.output());
    t.true(await goneWithin([tree.nodePid, tree.postgresPid], 60_000), `left running:\n${tree.output()}`);
    const logs = tree.logs();
    t.truthy(logs.find((line) => line.msg === 'stopping' && line.reason === reason), tree.output());
    t.is(logs.at(-1)?.msg, 'stopped', tree.output());
    t.deepEqual(logs.filter((line) => (line.level as number) >= 50), []);
  });
}
