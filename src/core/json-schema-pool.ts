// Schema work off the main thread, within time budgets: a small piscina pool, started on first
// use. Work past its budget has its thread terminated (piscina starts another) and the caller
// gets a 400-worthy answer: never a 500, and /health never waits. Work waits for a thread in a
// lane of its own tenant's, and the lanes take turns (fairShare): one tenant's flood of
// expensive validations delays another tenant's by one validation at most, not by the flood.
import { readFileSync } from 'node:fs';
import { Piscina } from 'piscina';
import { serviceUnavailable, UNAVAILABLE_RETRY_AFTER_SECONDS } from '../errors.ts';
import type { ValidationResult, ValidationTask } from './json-schema-worker.ts';

/** Milliseconds of CPU time one payload validation may use on a worker thread. */
export const VALIDATION_BUDGET_MS = 2_000;
/** Milliseconds of CPU time checking and compiling one schema may use on a worker thread. */
export const COMPILE_BUDGET_MS = 5_000;
/** Milliseconds of wall time either may take, however busy the machine. */
export const WALL_BUDGET_MS = 20_000;
/** Milliseconds a task may wait for a free thread before the request is answered 503. */
export const QUEUE_BUDGET_MS = 30_000;

/** Threads of the pool; as many tasks run at once, the rest wait in their lanes. */
export const THREADS = 2;
/** Tasks waiting in all lanes at most; past that a task is answered 503 (the longest lane's newest, or the one asking: makeRoom). */
export const MAX_WAITING = 1_000;

let pool: Piscina<ValidationTask, ValidationResult> | null = null;
let ready: Promise<unknown> | null = null;

// A thread is started (and loads Ajv) before budgets run, so a cold start never counts against one.
function warmPool(): { pool: Piscina<ValidationTask, ValidationResult>; ready: Promise<unknown> } {
  if (!pool) {
    pool = new Piscina<ValidationTask, ValidationResult>({
      filename: new URL('./json-schema-worker.ts', import.meta.url).href,
      minThreads: 1,
      maxThreads: THREADS,
      idleTimeout: 60_000,
      // A thread that reaches its heap limit is ended by Node, which lets V8 go 16 MB past the
      // limit meanwhile; past that V8 aborts the whole process. With V8's default young
      // generation a single scavenge could promote more than that (a validation collecting
      // millions of errors keeps every object alive), and one such validation in a few ended
      // the web process; a 4 MB young generation keeps a promotion within the 16 MB.
      resourceLimits: { maxOldGenerationSizeMb: 64, maxYoungGenerationSizeMb: 4 },
    });
    // A thread that dies outside a task (out of memory while its aborted task unwinds) is replaced
    // by piscina; unhandled, the pool's 'error' event would end the whole process. Once per pool:
    // added on every call (as it was), each validation off the main thread left one more listener
    // behind, for the life of the process.
    pool.on('error', () => {});
  }
  ready ??= pool.run({ ping: true }).catch(() => undefined);
  return { pool, ready };
}

const tooManyWaiting = () => serviceUnavailable(`Too many schema validations are waiting; retry after ${UNAVAILABLE_RETRY_AFTER_SECONDS} s.`);

type Waiter = { go: (release: () => void) => void; refuse: (error: Error) => void; timer: NodeJS.Timeout };

/**
 * Turns at the pool's threads, by lane (a tenant): at most THREADS tasks hold one. When one is
 * released, the next task comes from the waiting lane that holds the fewest turns, and among
 * those from the one served longest ago (the map's order: a lane served goes to its end). So a
 * tenant's flood of expensive work delays another tenant's task by one task at most. A task that
 * waits QUEUE_BUDGET_MS without a turn is answered 503. With MAX_WAITING waiting, a task of a lane
 * shorter than the longest by two or more takes the place of the longest lane's newest task (that
 * one is answered 503), else it is answered 503 itself: one tenant's flood cannot fill the line
 * for everyone.
 */
function makeFairShare() {
  const lanes = new Map<string, Waiter[]>();
  const holding = new Map<string, number>();
  let running = 0;
  let waiting = 0;
  const releaser = (lane: string) => () => {
    running -= 1;
    const held = (holding.get(lane) ?? 1) - 1;
    if (held === 0) holding.delete(lane);
    else holding.set(lane, held);
    dispatch();
  };
  const hold = (lane: string) => {
    running += 1;
    holding.set(lane, (holding.get(lane) ?? 0) + 1);
    return releaser(lane);
  };
  function dispatch(): void {
    while (running < THREADS && waiting > 0) {
      let chosen: [string, Waiter[]] | undefined;
      for (const entry of lanes) {
        if (!chosen || (holding.get(entry[0]) ?? 0) < (holding.get(chosen[0]) ?? 0)) chosen = entry;
        if ((holding.get(entry[0]) ?? 0) === 0) break;
      }
      if (!chosen) return;
      const [lane, queue] = chosen;
      const waiter = queue.shift() as Waiter;
      lanes.delete(lane);
      if (queue.length > 0) lanes.set(lane, queue);
      waiting -= 1;
      clearTimeout(waiter.timer);
      waiter.go(hold(lane));
    }
  }
  /** The line is full: the longest lane's newest task gives its place up, if that lane is longer than `lane`'s by two or more. */
  function makeRoom(lane: string): boolean {
    let longest: Waiter[] | undefined;
    for (const queue of lanes.values()) if (!longest || queue.length > longest.length) longest = queue;
    if (!longest || longest.length < (lanes.get(lane)?.length ?? 0) + 2) return false;
    const shed = longest.pop() as Waiter; // the longest lane keeps at least one: its entry stays
    waiting -= 1;
    clearTimeout(shed.timer);
    shed.refuse(tooManyWaiting());
    return true;
  }
  return {
    /** Resolves with the function that gives the turn back, once `lane` has one. */
    turn(lane: string): Promise<() => void> {
      if (running < THREADS && waiting === 0) return Promise.resolve(hold(lane));
      if (waiting >= MAX_WAITING && !makeRoom(lane)) return Promise.reject(tooManyWaiting());
      return new Promise((resolve, reject) => {
        const queue = lanes.get(lane) ?? [];
        const waiter: Waiter = {
          go: resolve,
          refuse: reject,
          timer: setTimeout(() => {
            const at = queue.indexOf(waiter);
            if (at < 0) return;
            queue.splice(at, 1);
            waiting -= 1;
            if (queue.length === 0 && lanes.get(lane) === queue) lanes.delete(lane);
            reject(tooManyWaiting());
          }, QUEUE_BUDGET_MS),
        };
        queue.push(waiter);
        waiting += 1;
        if (!lanes.has(lane)) lanes.set(lane, queue);
      });
    },
  };
}

const fairShare = makeFairShare();

// CPU time (user + system) of a thread of this process, from Linux's /proc (clock ticks of 10 ms).
function threadCpuMs(tid: number): number | null {
  if (!tid) return null;
  try {
    const stat = readFileSync(`/proc/self/task/${tid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) * 10;
  } catch {
    return null;
  }
}

export type ThreadOutcome = { result: ValidationResult } | { over: 'compile' | 'validation' | 'memory' };

type Task = { check: true; schemaText: string; root: string } | { key: string; schemaText: string; payloadText: string };

/**
 * Runs a task on a thread, when its lane (the tenant it is for) has its turn. Budgets are the
 * CPU time the thread spends on it (wall time where /proc is missing), so neither waiting
 * behind another tenant's work nor a busy machine uses them up.
 */
export async function runOnThread(task: Task, lane: string): Promise<ThreadOutcome> {
  const warm = warmPool();
  await warm.ready;
  const release = await fairShare.turn(lane);
  try {
    return await runWithBudgets(warm, 'key' in task ? { ...task, lane } : task);
  } finally {
    release();
  }
}

/** A task as the thread gets it, but for its clock: a validation names its lane, by which the thread keeps its compiled schemas. */
type ThreadTask = Exclude<Task, { key: string }> | (Extract<Task, { key: string }> & { lane: string });

async function runWithBudgets(warm: ReturnType<typeof warmPool>, task: ThreadTask): Promise<ThreadOutcome> {
  const clock = new Float64Array(new SharedArrayBuffer(24));
  const controller = new AbortController();
  const submitted = Date.now();
  let over: 'compile' | 'validation' | null = null;
  let phase: { name: 'compile' | 'validation'; cpu: number | null } | null = null;
  let timer: NodeJS.Timeout | undefined;
  const check = () => {
    const [began = 0, validating = 0, tid = 0] = clock;
    const now = Date.now();
    if (began === 0) {
      if (now - submitted >= QUEUE_BUDGET_MS) return controller.abort();
    } else {
      const name = validating === 0 ? 'compile' : 'validation';
      if (phase?.name !== name) phase = { name, cpu: threadCpuMs(tid) };
      const cpu = phase.cpu === null ? null : threadCpuMs(tid);
      const used = cpu === null || phase.cpu === null ? now - (validating || began) : cpu - phase.cpu;
      const budget = name === 'compile' ? COMPILE_BUDGET_MS : VALIDATION_BUDGET_MS;
      if (used >= budget || now - (validating || began) >= WALL_BUDGET_MS) over = name;
    }
    if (over) return controller.abort();
    timer = setTimeout(check, 50);
  };
  timer = setTimeout(check, 50);
  try {
    return { result: await warm.pool.run({ ...task, clock }, { signal: controller.signal }) };
  } catch (error) {
    if (controller.signal.aborted && !over) throw tooManyWaiting();
    if (over && (error as Error).name === 'AbortError') {
      ready = warm.pool.run({ ping: true }).catch(() => undefined);
      return { over };
    }
    if ((error as { code?: string }).code === 'ERR_WORKER_OUT_OF_MEMORY') {
      ready = warm.pool.run({ ping: true }).catch(() => undefined);
      return { over: 'memory' };
    }
    // The pool was stopped under the task (its process is stopping): the client may try again,
    // on this process's successor.
    if (warm.pool !== pool) throw serviceUnavailable(`The service is stopping; retry after ${UNAVAILABLE_RETRY_AFTER_SECONDS} s.`);
    throw error;
  } finally {
    clearTimeout(timer);
  }
}

let holders = 0;

/**
 * A web server's hold on the pool, which every web server of the process shares: the pool stops
 * when the last one holding it lets it go (one web per process in the service; tests run many
 * in one process, and one stopping must not take the threads from the others' validations).
 */
export function holdValidationPool(): () => Promise<void> {
  holders += 1;
  let held = true;
  return async () => {
    if (!held) return;
    held = false;
    holders -= 1;
    if (holders === 0) await stopValidationPool();
  };
}

/** Stops the pool's threads (on shutdown), whoever holds it. */
export async function stopValidationPool(): Promise<void> {
  const stopping = pool;
  pool = null;
  ready = null;
  await stopping?.destroy();
}
