// A validation thread (piscina): checks and compiles schemas, and validates payloads against
// them (compiled once per cache key), so that slow work blocks this thread, never the web process.
import { readlinkSync } from 'node:fs';
import type { ValidateFunction } from 'ajv';
import { runValidator, type SchemaProblem } from './json-schema-engine.ts';
import { checkAndCompile } from './schema-check.ts';
import type { SchemaShape } from './schema-limits.ts';
import { TenantCache } from './tenant-cache.ts';

/**
 * `clock` is shared with the web process: [0] receives the time work starts, [1] the time the
 * payload validation starts (after any compile), [2] this thread's Linux thread id, through
 * which the web process reads the CPU time the work uses (its budgets are CPU time).
 */
export type ValidationTask =
  | { ping: true }
  | { check: true; schemaText: string; root: string; clock: Float64Array }
  | { key: string; lane: string; schemaText: string; payloadText: string; clock: Float64Array };
export type ValidationResult =
  | { problems: SchemaProblem[] | null }
  | { checked: { shape: SchemaShape } }
  | { tooDeep: true };

const threadId = (() => {
  try {
    return Number(readlinkSync('/proc/thread-self').split('/').at(-1));
  } catch {
    return 0; // not Linux: budgets fall back to wall time
  }
})();

// Compiled validators by tenant (the task's lane) and key: a tenant that cycles through more
// schemas than the cache holds pushes out its own, not another's (tenant-cache.ts), so nobody
// else's expensive schema is compiled again because of it.
const MAX_COMPILED = 200;
const compiled = new TenantCache<ValidateFunction | SchemaProblem[]>(MAX_COMPILED);

function validatorFor(lane: string, key: string, schemaText: string): ValidateFunction | SchemaProblem[] {
  const known = compiled.get(lane, key);
  if (known) return known;
  const result = checkAndCompile(JSON.parse(schemaText) as Record<string, unknown>, 'event_type.schema');
  const entry = 'problems' in result ? result.problems : result.validate;
  compiled.set(lane, key, entry);
  return entry;
}

export default function run(task: ValidationTask): ValidationResult {
  if ('ping' in task) return { problems: null };
  task.clock[2] = threadId;
  task.clock[0] = Date.now();
  if ('check' in task) {
    const result = checkAndCompile(JSON.parse(task.schemaText) as Record<string, unknown>, task.root);
    return 'problems' in result ? { problems: result.problems } : { checked: { shape: result.shape } };
  }
  const validate = validatorFor(task.lane, task.key, task.schemaText);
  if (Array.isArray(validate)) return { problems: validate };
  task.clock[1] = Date.now();
  try {
    return { problems: runValidator(validate, JSON.parse(task.payloadText)) };
  } catch (error) {
    if (error instanceof RangeError) return { tooDeep: true };
    throw error;
  }
}
