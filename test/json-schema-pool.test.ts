// The validation pool of a web process lives as long as the process: validations off the main
// thread (large payloads, expensive schemas) must leave nothing behind on it. Each one used to
// add an 'error' listener to the pool, so a tenant posting large payloads grew the process's
// memory without bound (Node's MaxListenersExceededWarning named it after the tenth).
import test from 'ava';
import { INLINE_MAX_PAYLOAD, prepareValidator, validatePayload, type PayloadValidator } from '../src/core/json-schema.ts';
import { stopValidationPool } from '../src/core/json-schema-pool.ts';

test.after.always(() => stopValidationPool());

test('validations on the pool\'s threads add no listener to the pool, however many there are', async (t) => {
  t.timeout(120_000); // 30 validations on a thread of a busy 2-core machine
  const warnings: Error[] = [];
  const onWarning = (warning: Error) => warnings.push(warning);
  process.on('warning', onWarning);
  try {
    const prepared = await prepareValidator({
      type: 'object', properties: { note: { type: 'string' }, amount: { type: 'integer' } }, required: ['amount'],
    }, 'pool-test-1');
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
