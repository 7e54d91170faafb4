// The npm scripts as the benches and tests read them (bench/scripts.ts), so that they start a
// role exactly as `npm start`, `npm run web` and `npm run worker` do, settings included.
import test from 'ava';
import { nodeFlagsOf, parseNodeScript, readNodeScript } from '../bench/scripts.ts';
import { ROOT } from './helpers/process.ts';

test('a script\'s assignments are expanded as sh expands them, its node words kept in order', (t) => {
  const script = 'MALLOC_ARENA_MAX=${MALLOC_ARENA_MAX:-2} FOO=bar exec node --max-semi-space-size=6 src/main.ts web';
  t.deepEqual(parseNodeScript(script, {}), { env: { MALLOC_ARENA_MAX: '2', FOO: 'bar' }, args: ['--max-semi-space-size=6', 'src/main.ts', 'web'] });
  // The operator's own setting wins over the default; an empty one does not (`:-`).
  t.is(parseNodeScript(script, { MALLOC_ARENA_MAX: '4' }).env.MALLOC_ARENA_MAX, '4');
  t.is(parseNodeScript(script, { MALLOC_ARENA_MAX: '' }).env.MALLOC_ARENA_MAX, '2');
  t.deepEqual(nodeFlagsOf(parseNodeScript(script, {})), ['--max-semi-space-size=6']);
  // Scripts of older checkouts (the A/B scripts start those too): no assignments.
  t.deepEqual(parseNodeScript('exec node --a src/main.ts worker', {}), { env: {}, args: ['--a', 'src/main.ts', 'worker'] });
});

test('a script of another form is refused, not misread', (t) => {
  t.throws(() => parseNodeScript('tsx src/main.ts web', {}), { message: /not "\[NAME=value\]/ });
  t.throws(() => parseNodeScript('A="x y" exec node src/main.ts web', {}), { message: /unsupported assignment/ });
  t.throws(() => parseNodeScript('A=$(date) node src/main.ts web', {}), { message: /unsupported assignment/ });
});

test('the web\'s scripts limit glibc to two malloc arenas, unless the operator set another number; the worker\'s does not', (t) => {
  for (const name of ['start', 'web']) {
    const script = readNodeScript(ROOT, name, {});
    t.is(script.env.MALLOC_ARENA_MAX, '2', name);
    t.deepEqual(script.args.slice(-2), ['src/main.ts', name === 'start' ? 'all' : name], name);
    t.is(readNodeScript(ROOT, name, { MALLOC_ARENA_MAX: '8' }).env.MALLOC_ARENA_MAX, '8', name);
  }
  // Measured: the worker's peak RSS was 6 MB higher with two arenas (README, Processes).
  t.deepEqual(readNodeScript(ROOT, 'worker', {}).env, {});
});
