// The validation pool of a web process lives as long as the process: validations off the main
// thread (large payloads, expensive schemas) must leave nothing behind on it. Each one used to
// add an 'error' listener to the pool, so a tenant posting large payloads grew the process's
// memory without bound (Node's MaxListenersExceededWarning named it after the tenth). And a
// validation that runs out of memory on its thread must end that thread alone, never the process.
import test from 'ava';
import { INLINE_MAX_PAYLOAD, prepareValidator, validatePayload, type PayloadValidator } from '../src/core/json-schema.ts';
import { holdValidationPool, MAX_WAITING, stopValidationPool, THREADS } from '../src/core/json-schema-pool.ts';

test.after.always(() => stopValidationPool());

test('validations on the pool\'s threads add no listener to the pool, however many there are', async (t) => {
  t.timeout(120_000); // 30 validations on a thread of a busy 2-core machine
  const warnings: Error[] = [];
  const onWarning = (warning: Error) => warnings.push(warning);
  process.on('warning', onWarning);
  try {
    const prepared = await prepareValidator({
      type: 'object', properties: { note: { type: 'string' }, amount: { type: 'integer' } }, required: ['amount'],
    }, 'pool-test-1', 'org_pool_test');
    if ('problems' in prepared) return t.fail(JSON.stringify(prepared.problems));
    const validator: PayloadValidator = prepared;
    // Past INLINE_MAX_PAYLOAD, so every one goes to a thread.
    const note = 'x'.repeat(INLINE_MAX_PAYLOAD);
    for (let i = 0; i < 15; i += 1) {
      const good = { note, amount: i };
      t.is(await validatePayload(validator, good, JSON.stringify(good)), null);
      const bad = { note, amount: 'many' };
      const problems = await validatePayload(validator, bad, JSON.stringify(bad));
      t.true(problems?.some((problem) => problem.path === 'payload.amount') ?? false, JSON.stringify(problems));
    }
    await new Promise((resolve) => setImmediate(resolve)); // warnings are emitted on a later tick
  } finally {
    process.off('warning', onWarning);
  }
  t.deepEqual(warnings.filter((warning) => warning.name === 'MaxListenersExceededWarning').map(String), []);
});

// A schema whose `anyOf` re-enters the root 100 times at each level of the payload, and a payload
// 4 levels deep: about 2 s of a thread's CPU each, whatever budget or limit stops it first.
const FAN_OUT = { type: 'object', properties: { x: { anyOf: Array.from({ length: 100 }, () => ({ $ref: '#' })) } } };
const FOUR_DEEP = { x: { x: { x: { x: 1 } } } };

// With FAN_OUT, a payload 4 levels deep makes Ajv collect over 100 million errors, about 245
// bytes each, faster than the CPU budget stops it. The thread's heap limit stops it, but with
// V8's default young generation (tens of MB for a thread) one scavenge could promote more than the 16 MB Node grants a thread
// to finish when it reaches its limit, and V8 then aborted the whole process ("Reached heap
// limit"): one such validation in 3 to 20 ended a web process (with web and worker, as `npm
// start` runs them). A 4 MB young generation keeps what a scavenge promotes within that grant.
// The abort is a matter of chance, rarer inside ava: this test does not fail on every run of the
// old pool (it survived 36 such validations there in three runs; standalone, the old pool died
// after 3, 5 and 19, the new one lived through 60).
test('validations that run out of memory on their threads are refused, and the process lives on', async (t) => {
  t.timeout(300_000); // 8 validations of about 2 s of CPU each, on a busy 2-core machine
  const prepared = await prepareValidator(FAN_OUT, 'pool-test-fan-out', 'org_pool_test');
  if ('problems' in prepared) return t.fail(JSON.stringify(prepared.problems));
  for (let round = 0; round < 2; round += 1) {
    const outcomes = await Promise.all(Array.from({ length: 4 }, () => validatePayload(prepared, FOUR_DEEP, JSON.stringify(FOUR_DEEP))));
    for (const problems of outcomes) {
      t.regex(problems?.[0]?.message ?? '', /could not be validated: it (needed more memory than one validation may use|took longer than the \d+ ms budget)/);
    }
  }
  // The pool works on: a payload that is valid against the same schema.
  const valid = { x: { x: {} } };
  t.is(await validatePayload(prepared, valid, JSON.stringify(valid)), null);
});

// Two threads serve every tenant of a web process. Waiting work used to queue in one line, so a
// tenant that sent 40 expensive validations at once held every other tenant's validations for
// up to 30 s and then had them answered 503. Lanes by tenant take turns now, the one holding
// fewest threads first.
test.serial('one tenant\'s flood of expensive validations delays another tenant\'s by one validation at most', async (t) => {
  t.timeout(300_000);
  const flood = await prepareValidator(FAN_OUT, 'pool-test-flood', 'org_flood');
  const other = await prepareValidator({ type: 'object', properties: { note: { type: 'string' } } }, 'pool-test-other', 'org_other');
  if ('problems' in flood || 'problems' in other) return t.fail('schemas refused');
  const large = { note: 'x'.repeat(INLINE_MAX_PAYLOAD) }; // past the inline limit: to a thread
  t.is(await validatePayload(other, large, JSON.stringify(large)), null, 'threads up, the other tenant\'s schema compiled');
  const finished: string[] = [];
  const floods = Array.from({ length: 4 }, (_, i) => validatePayload(flood, FOUR_DEEP, JSON.stringify(FOUR_DEEP)).then((problems) => {
    finished.push(`flood ${i}`);
    return problems;
  }));
  await new Promise((resolve) => setImmediate(resolve)); // the flood is running and waiting
  const problems = await validatePayload(other, large, JSON.stringify(large));
  finished.push('other');
  t.is(problems, null);
  for (const refused of await Promise.all(floods)) t.regex(refused?.[0]?.message ?? '', /could not be validated/);
  t.true(finished.indexOf('other') <= 2, `finished in this order: ${finished.join(', ')}`);
});

// The line of waiting validations is bounded (MAX_WAITING), and was one bound for all: a tenant
// that filled it had every other tenant's validation answered 503 at once until it drained. Now
// the longest lane gives its newest place up to a shorter one. All in one turn of the event loop
// (every validation below asks for its turn before any thread answers): no timing.
test.serial('a tenant that fills the line of waiting validations gives its newest place up to another tenant', async (t) => {
  const schema = { type: 'object', properties: { note: { type: 'string' } } };
  const flood = await prepareValidator(schema, 'pool-test-line-flood', 'org_line_flood');
  const other = await prepareValidator(schema, 'pool-test-line-other', 'org_line_other');
  if ('problems' in flood || 'problems' in other) return t.fail('schemas refused');
  const large = { note: 'x'.repeat(INLINE_MAX_PAYLOAD) }; // past the inline limit: to a thread, and quick there
  const text = JSON.stringify(large);
  for (const validator of [flood, other]) t.is(await validatePayload(validator, large, text), null, 'compiled on the threads');
  const settle = (validation: Promise<unknown>) => validation.then(() => 'valid', (error: { status?: number }) => `refused ${error.status}`);
  const floods = Array.from({ length: THREADS + MAX_WAITING }, () => settle(validatePayload(flood, large, text)));
  const mine = settle(validatePayload(other, large, text));
  const again = settle(validatePayload(flood, large, text)); // the flood's own lane is the longest: refused at once
  t.is(await mine, 'valid', 'the other tenant\'s validation took the flood\'s newest place');
  const outcomes = await Promise.all(floods);
  t.deepEqual(outcomes.slice(-1), ['refused 503'], 'the newest of the flood gave its place up');
  t.true(outcomes.slice(0, -1).every((o) => o === 'valid'), 'the rest of the flood was validated');
  t.is(await again, 'refused 503');
});

// Every web server of a process shares the pool, and a server's stop used to stop it: with
// several in one process (the tests' processes), a validation of one server's request running on
// a thread when another stopped was aborted and answered 500. The pool stops when the last
// holder lets it go now, and a validation it stops under is answered 503, as a stopping
// service's. Serial: it stops the process's pool.
test.serial('the pool stops when the last web server holding it lets it go; a validation it stops under is a 503, not a 500', async (t) => {
  t.timeout(300_000); // validations of about 2 s of CPU each, on a busy 2-core machine
  const prepared = await prepareValidator(FAN_OUT, 'pool-test-holders', 'org_pool_holders');
  if ('problems' in prepared) return t.fail(JSON.stringify(prepared.problems));
  const expensive = () => validatePayload(prepared, FOUR_DEEP, JSON.stringify(FOUR_DEEP)).then(
    (problems) => problems?.[0]?.message ?? 'valid', (error: { status?: number; message?: string }) => `refused ${error.status}: ${error.message}`);
  const first = holdValidationPool();
  const second = holdValidationPool();
  const running = expensive();
  await new Promise((resolve) => setTimeout(resolve, 200)); // on its thread
  await first();
  await first(); // a second release of the same hold changes nothing
  t.regex(await running, /could not be validated/, 'one holder let go: the validation ran to its own end');
  const stopped = expensive();
  await new Promise((resolve) => setTimeout(resolve, 200));
  await second();
  t.regex(await stopped, /^refused 503: The service is stopping/, 'the last holder let go: the validation is refused as by a stopping service');
  const valid = { x: { x: {} } };
  t.is(await validatePayload(prepared, valid, JSON.stringify(valid)), null, 'a later validation starts the pool again');
});
