// Validation off the main thread, within a time budget: a small piscina pool, started on first
// use. A validation past the budget has its thread terminated (piscina starts another) and the
// payload is refused as too expensive to validate: a 400, never a 500, and /health never waits.
import { Piscina } from 'piscina';
import { AppError } from '../api/errors.ts';
import type { SchemaProblem } from './json-schema-engine.ts';
import type { ValidationResult, ValidationTask } from './json-schema-worker.ts';

/** Milliseconds one payload validation may take on a worker thread (queueing included). */
export const VALIDATION_BUDGET_MS = 2_000;

let pool: Piscina<ValidationTask, ValidationResult> | null = null;
let ready: Promise<unknown> | null = null;

// A thread is started (and loads Ajv) before budgets run, so a cold start never counts against one.
function warmPool(): { pool: Piscina<ValidationTask, ValidationResult>; ready: Promise<unknown> } {
  pool ??= new Piscina<ValidationTask, ValidationResult>({
    filename: new URL('./json-schema-worker.ts', import.meta.url).href,
    minThreads: 1,
    maxThreads: 2,
    idleTimeout: 60_000,
    maxQueue: 1_000,
    resourceLimits: { maxOldGenerationSizeMb: 64 },
  });
  ready ??= pool.run({ ping: true }).catch(() => undefined);
  return { pool, ready };
}

const tooExpensive = (why: string): SchemaProblem[] => [{
  path: 'payload',
  message: `could not be validated: ${why}; the event type's schema is too expensive for this payload (fewer nested anyOf/oneOf branches or a smaller payload help)`,
}];

/** Validates on a worker thread: null when valid, else problems (also when over budget). */
export async function validateOffThread(key: string, schemaText: string, payloadText: string): Promise<SchemaProblem[] | null> {
  const warm = warmPool();
  await warm.ready;
  let result: ValidationResult;
  try {
    result = await warm.pool.run({ key, schemaText, payloadText }, { signal: AbortSignal.timeout(VALIDATION_BUDGET_MS) });
  } catch (error) {
    const name = (error as Error).name;
    if ((error as Error).message === 'Task queue is at limit') {
      throw new AppError(503, 'service_unavailable', 'Too many payload validations are waiting; try again shortly.');
    }
    if (name === 'AbortError' || name === 'TimeoutError') {
      ready = warm.pool.run({ ping: true }).catch(() => undefined);
      return tooExpensive(`it took longer than the ${VALIDATION_BUDGET_MS} ms budget`);
    }
    if ((error as { code?: string }).code === 'ERR_WORKER_OUT_OF_MEMORY') {
      ready = warm.pool.run({ ping: true }).catch(() => undefined);
      return tooExpensive('it needed more memory than a validation may use');
    }
    throw error;
  }
  return 'tooDeep' in result ? tooExpensive('the payload is nested too deeply for it') : result.problems;
}

/** Stops the pool's threads (on shutdown). */
export async function stopValidationPool(): Promise<void> {
  const stopping = pool;
  pool = null;
  ready = null;
  await stopping?.destroy();
}
