// Event type schemas: checked when an event type is written and used to validate job payloads.
// JSON Schema 2020-12 unless `$schema` names draft-07 or 2019-09. No tenant input changes state
// another tenant uses: every schema compiles in an Ajv instance of its own (schema-check.ts).
// Cost is bounded by the limits (schema-limits.ts), RE2, and time budgets: checking a schema
// larger than CHEAP.chars runs on a worker thread, and so do validations unless the schema is
// known to be cheap and the payload small enough for what its patterns and formats cost. Inline,
// a validation stops at the first problem; an invalid payload's problems are then collected on a
// thread (the first one is the answer when that goes past its budget).
import type { ValidateFunction } from 'ajv';
import { runValidator, type SchemaProblem } from './json-schema-engine.ts';
import { COMPILE_BUDGET_MS, runOnThread, VALIDATION_BUDGET_MS, type ThreadOutcome } from './json-schema-pool.ts';
import { checkAndCompile } from './schema-check.ts';
import { CHEAP, checkSizeAndDepth, type SchemaShape } from './schema-limits.ts';

export type { SchemaProblem } from './json-schema-engine.ts';

/** Payloads up to this many characters of JSON are validated inline against a cheap schema. */
export const INLINE_MAX_PAYLOAD = 8_192;

/**
 * What one inline validation may cost, as the payload's length times what its schema reaches
 * (SchemaShape): subschema checks (`work` × characters; up to 7.6 ns each measured, when every
 * item of an array fails every branch of an anyOf, so 1,500,000 is about 12 ms), RE2 steps
 * (instructions × characters; 15-60 ns each measured, so 200,000 is at most about 12 ms) and
 * costly format checks (characters squared, as a backtracking regex can take: `url` took 130 ms
 * on 8,150 characters, about 2 ns each; 2,000,000 is about 4 ms). Past any, the payload goes to
 * a thread. Bounds on the schema alone were not enough: 989 subschemas, an `enum` of 700 in each
 * of 432 branches and 4,000 array items (an 8 KB payload) held the event loop, every tenant's
 * requests with it, for 3.7-7.7 s (a probe).
 */
export const INLINE_BUDGET = { steps: 1_500_000, patternSteps: 200_000, formatSteps: 2_000_000 } as const;

/** Whether a payload of `length` characters of JSON is validated inline against this validator. */
export const runsInline = (validator: PayloadValidator, length: number): boolean => validator.inline !== null
  && length <= INLINE_MAX_PAYLOAD && validator.inline.shape.work * length <= INLINE_BUDGET.steps
  && validator.inline.shape.patternReach * length <= INLINE_BUDGET.patternSteps
  && validator.inline.shape.formatReach * length * length <= INLINE_BUDGET.formatSteps;

/**
 * A checked event type schema; `inline` (a validator that stops at the first problem, and the
 * schema's shape) only when it is known to be cheap. `lane`: the tenant whose turn at the
 * validation threads its work takes (json-schema-pool.ts).
 */
export type PayloadValidator = { key: string; schemaText: string; inline: Inline | null; lane: string };

type Inline = { validate: ValidateFunction; shape: SchemaShape };

const tooExpensive = (path: string, what: string, why: string): SchemaProblem[] => [{
  path, message: `could not be ${what}: ${why}; the event type's schema is too expensive${path === 'payload' ? ' for this payload' : ''} (fewer nested anyOf/oneOf branches, patterns or properties help)`,
}];

function overBudget(outcome: Extract<ThreadOutcome, { over: unknown }>, path: string, what: string): SchemaProblem[] {
  if (outcome.over === 'memory') return tooExpensive(path, what, 'it needed more memory than one validation may use');
  const budget = outcome.over === 'compile' ? COMPILE_BUDGET_MS : VALIDATION_BUDGET_MS;
  return tooExpensive(path, what, `it took longer than the ${budget} ms budget`);
}

type Checked = { problems: SchemaProblem[] } | { cheap: Inline | null };

const isCheap = (shape: SchemaShape, schemaText: string) => !shape.recursive && shape.expanded <= CHEAP.expanded
  && schemaText.length <= CHEAP.chars && shape.patternInstructions <= CHEAP.patternInstructions;

// A small schema is checked inline, and compiled inline only when it is known to be cheap; any
// other is compiled on a thread within the compile budget, and never on the main thread. Its size
// alone did not bound the compile: Ajv inlined a $ref's definition at each of its uses, and 100
// $refs to one definition of 37 properties (4,066 characters) took 1.8-2.4 s to compile, every
// tenant's requests held meanwhile (a probe). Ajv now compiles each definition once
// (inlineRefs: false, json-schema-engine.ts): that schema compiles in 30-50 ms, on a thread.
async function check(schema: Record<string, unknown>, root: string, lane: string): Promise<Checked> {
  const sized = checkSizeAndDepth(schema, root);
  if (sized) return { problems: sized };
  const schemaText = JSON.stringify(schema);
  if (schemaText.length <= CHEAP.chars) {
    const result = checkAndCompile(schema, root, false, (shape) => isCheap(shape, schemaText));
    if ('problems' in result) return result;
    if ('validate' in result) return { cheap: result };
  }
  const outcome = await runOnThread({ check: true, schemaText, root }, lane);
  if ('over' in outcome) return { problems: overBudget(outcome, root, 'compiled') };
  const { result } = outcome;
  if ('problems' in result) return { problems: result.problems ?? [] };
  if (!('checked' in result)) return { problems: [{ path: root, message: 'is too deeply nested to compile' }] };
  return { cheap: null };
}

/**
 * Problems (under `root`, e.g. "schema") when the schema is not a valid JSON Schema or breaks a
 * limit; null when fine. `lane`: the tenant it is checked for.
 */
export async function checkSchema(schema: Record<string, unknown>, lane: string, root = 'schema'): Promise<SchemaProblem[] | null> {
  const checked = await check(schema, root, lane);
  return 'problems' in checked ? checked.problems : null;
}

/**
 * A validator for a stored schema (`key` names its version), or the problems it has today.
 * `lane`: the tenant whose event type it is.
 */
export async function prepareValidator(schema: Record<string, unknown>, key: string, lane: string): Promise<PayloadValidator | { problems: SchemaProblem[] }> {
  const checked = await check(schema, 'event_type.schema', lane);
  if ('problems' in checked) return checked;
  return { key, schemaText: JSON.stringify(schema), inline: checked.cheap, lane };
}

/**
 * Validates a job payload: null when valid, else its problems (at most MAX_DETAILS). Cheap
 * schemas with payloads they can afford run inline, up to the first problem; the rest, and the
 * whole list of an invalid payload's problems, on a worker thread within a time budget. Past it
 * the payload is refused (400) with the first problem found inline, or as too expensive to
 * validate when none was.
 */
export async function validatePayload(validator: PayloadValidator, payload: unknown, payloadText: string): Promise<SchemaProblem[] | null> {
  let first: SchemaProblem[] | null = null;
  if (validator.inline && runsInline(validator, payloadText.length)) {
    try {
      first = runValidator(validator.inline.validate, payload);
    } catch (error) {
      if (!(error instanceof RangeError)) throw error;
      return [{ path: 'payload', message: 'is nested too deeply for the event type\'s schema' }];
    }
    if (!first) return null;
  }
  const outcome = await runOnThread({ key: validator.key, schemaText: validator.schemaText, payloadText }, validator.lane);
  if ('over' in outcome) return first ?? overBudget(outcome, 'payload', 'validated');
  const { result } = outcome;
  if ('tooDeep' in result) return tooExpensive('payload', 'validated', 'the payload is nested too deeply for it');
  return 'problems' in result ? result.problems : null;
}
