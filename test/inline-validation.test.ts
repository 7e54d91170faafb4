// What a job payload's validation may cost the web process's main thread (src/core/json-schema.ts):
// inline it stops at the first problem, so a schema whose failed branches multiply (an anyOf of
// $refs to anyOfs, over every item of an array) no longer collects hundreds of thousands of
// errors there (0.9 s and 100 MB held at 800 items; 2,000 items, about 4 KB of payload, ran a
// web process with its production heap out of memory); the whole list of problems is collected
// on a validation thread. And a schema's patterns and costly formats are counted at every place
// a payload value meets them through $refs, times the payload's length, so that a long payload
// against such a schema goes to a thread too (a pattern of 1,001 RE2 instructions reached through
// three $refs took 1.17 s inline on an 8 KB string; format "url" 130 ms a check).
import test from 'ava';
import { Ajv } from 'ajv';
import { compileIsolated } from '../src/core/json-schema-engine.ts';
import { INLINE_BUDGET, prepareValidator, runsInline, validatePayload, type PayloadValidator } from '../src/core/json-schema.ts';
import { stopValidationPool } from '../src/core/json-schema-pool.ts';
import { checkSchemaLimits } from '../src/core/schema-limits.ts';

test.after.always(() => stopValidationPool());

const refs = (to: string, n: number) => Array.from({ length: n }, () => ({ $ref: `#/$defs/${to}` }));
/** 9 × 9 × 5 = 405 ways for each array item to fail, all through $refs. */
const BRANCHING = {
  type: 'object',
  $defs: { s: { type: 'string' }, b: { anyOf: refs('s', 9) }, c: { anyOf: refs('b', 9) }, d: { anyOf: refs('c', 5) } },
  properties: { a: { type: 'array', items: { $ref: '#/$defs/d' } } },
};

async function prepared(schema: Record<string, unknown>, key: string): Promise<PayloadValidator> {
  const result = await prepareValidator(schema, key, 'org_inline_test');
  if ('problems' in result) throw new Error(JSON.stringify(result.problems));
  return result;
}

test('inline, a payload that fails every branch of every item stops at its first item; the answer names it', async (t) => {
  t.timeout(120_000); // the thread's full list may run to its budget on a busy machine
  const validator = await prepared(BRANCHING, 'inline-test-branching');
  t.not(validator.inline, null, 'a small schema of 914 subschemas is cheap');
  const payload = { a: Array.from({ length: 500 }, () => 0) };
  const text = JSON.stringify(payload);
  t.true(runsInline(validator, text.length), 'within the budget of subschema checks');
  const problems = await validatePayload(validator, payload, text);
  t.truthy(problems);
  t.is(problems![0]!.path, 'payload.a.0', JSON.stringify(problems));
  // The inline validator kept the errors of the first item's 405 failed paths, not of 500 items' (202,500).
  const kept = validator.inline!.validate.errors?.length ?? 0;
  t.true(kept > 0 && kept <= 1_000, `${kept} errors kept inline`);
  // A valid payload passes inline as before.
  const good = { a: Array.from({ length: 500 }, () => 'x') };
  t.is(await validatePayload(validator, good, JSON.stringify(good)), null);
});

test('patterns count at every $ref that reaches them, costly formats at every place, each times the payload\'s length', async (t) => {
  const pattern = { type: 'string', pattern: '^\\p{L}{100}\\d$' };
  const threeRefs = {
    type: 'object', $defs: { p: pattern },
    properties: { x: { $ref: '#/$defs/p' }, y: { $ref: '#/$defs/p' }, z: { $ref: '#/$defs/p' } },
  };
  const shape = checkSchemaLimits(threeRefs);
  if (!('shape' in shape)) return t.fail(JSON.stringify(shape));
  t.true(shape.shape.patternInstructions > 100);
  t.is(shape.shape.patternReach, 3 * shape.shape.patternInstructions);
  t.is(shape.shape.formatReach, 0);

  const validator = await prepared(threeRefs, 'inline-test-patterns');
  const perChar = shape.shape.patternReach;
  const longest = Math.floor(INLINE_BUDGET.patternSteps / perChar);
  t.true(runsInline(validator, longest));
  t.false(runsInline(validator, longest + 1), 'a longer payload goes to a thread');
  const long = { x: `${'a'.repeat(8_000)}` };
  t.false(runsInline(validator, JSON.stringify(long).length));
  const problems = await validatePayload(validator, long, JSON.stringify(long));
  t.deepEqual(problems?.map((p) => p.path), ['payload.x'], 'validated on a thread, with its problem');

  const formats = checkSchemaLimits({
    type: 'object', $defs: { u: { type: 'string', format: 'url' } },
    properties: { a: { $ref: '#/$defs/u' }, b: { $ref: '#/$defs/u' }, when: { type: 'string', format: 'date-time' }, id: { format: 'uuid' } },
  });
  if (!('shape' in formats)) return t.fail(JSON.stringify(formats));
  t.is(formats.shape.formatReach, 2, 'url twice through $refs; date-time and uuid are linear');
  const urls = await prepared({ type: 'object', properties: { u: { type: 'string', format: 'url' } } }, 'inline-test-url');
  t.true(runsInline(urls, 1_000));
  t.false(runsInline(urls, 2_000), 'a backtracking format on 2,000 characters goes to a thread');
  const hostile = { u: `http://${':'.repeat(8_100)}` };
  const refused = await validatePayload(urls, hostile, JSON.stringify(hostile));
  t.deepEqual(refused?.map((p) => p.path), ['payload.u']);
});

test('subschema checks count too, each weighed by its enum and const, times the payload\'s length: a cheap schema\'s long payload goes to a thread', async (t) => {
  // A probe: 989 subschemas (under the cheap limit of 1,000), an enum of 700 in each of the 432
  // branches an array item tries, and an 8 KB payload of 4,000 zeros held the event loop, and
  // every tenant's requests, for 3.7-7.7 s.
  const probe = {
    type: 'object',
    properties: { a: { type: 'array', items: { $ref: '#/$defs/a' } } },
    $defs: {
      a: { anyOf: [...refs('b', 6), {}] },
      b: { anyOf: refs('c', 9) },
      c: { anyOf: refs('e', 8) },
      e: { enum: Array.from({ length: 700 }, (_, i) => i + 1) },
    },
  };
  const limits = checkSchemaLimits(probe);
  if (!('shape' in limits)) return t.fail(JSON.stringify(limits));
  t.true(limits.shape.expanded <= 1_000, `${limits.shape.expanded} subschemas: cheap by count`);
  t.true(limits.shape.work > 400 * 700 / 16, `work ${limits.shape.work}: the 432 enums weigh`);
  const validator = await prepared(probe, 'inline-test-enums');
  t.not(validator.inline, null, 'a cheap schema');
  const payload = { a: Array.from({ length: 4_000 }, () => 0) };
  t.false(runsInline(validator, JSON.stringify(payload).length), 'the 8 KB payload goes to a thread');
  const longest = Math.floor(INLINE_BUDGET.steps / limits.shape.work);
  t.true(longest >= 10, 'a short payload still validates inline');
  t.true(runsInline(validator, longest));
  t.false(runsInline(validator, longest + 1));

  // Without enums, the subschemas alone: 914 of them, each item failing every branch.
  const branching = checkSchemaLimits(BRANCHING);
  if (!('shape' in branching)) return t.fail(JSON.stringify(branching));
  t.is(branching.shape.work, branching.shape.expanded, 'no enum, const or required: one each');
  const many = await prepared(BRANCHING, 'inline-test-branching-long');
  t.false(runsInline(many, JSON.stringify({ a: Array.from({ length: 4_000 }, () => 0) }).length));
  const names = Array.from({ length: 100 }, (_, i) => `r${i}`);
  const required = checkSchemaLimits({ type: 'object', required: names });
  if (!('shape' in required)) return t.fail(JSON.stringify(required));
  t.is(required.shape.work, 1 + Math.ceil(JSON.stringify(names).length / 16), 'required weighs by its length');
});

// A probe: 100 $refs to one definition of 37 properties, 4,066 characters of JSON, under the size
// (4,096) below which a schema was checked and compiled on the main thread "because its size bounds
// the work": Ajv copied the definition into each $ref, and the compile took 1.8-2.4 s there, at the
// schema's create, its PATCH and the first job after any PATCH, every tenant's requests held.
const SMALL_BUT_WIDE = {
  $defs: { l: { type: 'object', properties: Object.fromEntries(Array.from({ length: 37 }, (_, i) => [`p${i}`, { type: 'string', minLength: 1, maxLength: 9 }])) } },
  anyOf: refs('l', 100),
};

test('a definition is compiled once, not copied into each $ref that uses it', (t) => {
  t.true(JSON.stringify(SMALL_BUT_WIDE).length <= 4_096);
  const definition = compileIsolated(SMALL_BUT_WIDE.$defs.l, 'draft2020', false);
  const hundred = compileIsolated(SMALL_BUT_WIDE, 'draft2020', false);
  // Copied, the root's code held the definition's a hundred times (3.96 MB against 39 KB); compiled
  // once, it holds a call to it per $ref (100 KB).
  const [root, one] = [String(hundred).length, String(definition).length];
  t.true(root < 10 * one, `${root} characters of code against the definition's ${one}`);
  t.false(hundred({ p0: '' }) as boolean);
  t.true(hundred({ p0: 'x' }) as boolean);
});

test('a small schema that is not cheap is checked on the main thread and compiled only on a thread', async (t) => {
  // The compiles the main thread makes of a schema (the threads load Ajv of their own).
  const core = Object.getPrototypeOf(Ajv.prototype) as { compile: (schema: unknown, ...rest: unknown[]) => unknown };
  const compile = core.compile;
  const compiled: unknown[] = [];
  core.compile = function (this: unknown, schema: unknown, ...rest: unknown[]) {
    compiled.push(schema);
    return compile.call(this, schema, ...rest);
  };
  t.teardown(() => { core.compile = compile; });
  const wide = structuredClone(SMALL_BUT_WIDE);
  const limits = checkSchemaLimits(wide);
  if (!('shape' in limits)) return t.fail(JSON.stringify(limits));
  t.true(limits.shape.expanded > 1_000, `${limits.shape.expanded} subschemas: not cheap`);
  const validator = await prepared(wide, 'inline-test-small-but-wide');
  t.is(validator.inline, null);
  t.false(compiled.includes(wide), 'not compiled on the main thread');
  t.is(await validatePayload(validator, { p0: 'x' }, '{"p0":"x"}'), null);
  t.is((await validatePayload(validator, { p0: '' }, '{"p0":""}'))?.[0]?.path.startsWith('payload'), true);
  // A cheap one is still compiled here, once, for its inline validations.
  const cheap = { type: 'object', properties: { n: { type: 'integer' } } };
  t.not((await prepared(cheap, 'inline-test-cheap')).inline, null);
  t.true(compiled.includes(cheap));
});
