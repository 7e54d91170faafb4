// The layout is the architecture (style: src/api, src/db, src/core, src/worker), and these
// tests keep it so by reading the source: core, db and worker never import api (the error
// classes live in src/errors.ts), db imports neither core nor worker, no route imports another
// route (what two routes share lives beside them), and every insert, update or delete of a
// table written in TypeScript is in that table's db/ module.
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import test from 'ava';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

/** Every .ts file below src/, as paths relative to the repository root. */
function sourceFiles(): string[] {
  return readdirSync(path.join(root, 'src'), { recursive: true, encoding: 'utf8' })
    .filter((file) => file.endsWith('.ts'))
    .map((file) => path.posix.join('src', file.split(path.sep).join('/')));
}

/** The repository-relative targets of a file's relative imports (static, re-exports and dynamic). */
function importsOf(file: string, text: string): string[] {
  const specifiers = [
    ...text.matchAll(/^\s*(?:import|export)\b[^;]*?\bfrom\s*['"]([^'"]+)['"]/gms),
    ...text.matchAll(/^\s*import\s*['"]([^'"]+)['"]/gm),
    ...text.matchAll(/\bimport\(\s*['"]([^'"]+)['"]\s*\)/g),
  ].map((match) => match[1]!);
  return specifiers.filter((s) => s.startsWith('.')).map((s) => path.posix.join(path.posix.dirname(file), s));
}

const edges = sourceFiles().flatMap((from) =>
  importsOf(from, readFileSync(path.join(root, from), 'utf8')).map((to) => ({ from, to })));

const under = (dir: string) => (file: string) => file.startsWith(`${dir}/`);
const isRoute = under('src/api/routes');

/** The edges from files matching `from` to files matching `to`, as readable lines. */
const violations = (from: (file: string) => boolean, to: (file: string) => boolean) =>
  edges.filter((e) => from(e.from) && to(e.to)).map((e) => `${e.from} imports ${e.to}`);

test('the import reader sees the imports it checks (so the rules below cannot pass on nothing)', (t) => {
  t.true(edges.length > 100, `only ${edges.length} imports read`);
  t.true(edges.some((e) => e.from === 'src/api/app.ts' && isRoute(e.to)), 'app.ts is seen mounting the routes');
  t.true(edges.some((e) => e.from === 'src/core/endpoints.ts' && e.to === 'src/errors.ts'), 'core is seen importing src/errors.ts');
  t.deepEqual(importsOf('src/api/routes/a.ts', [
    "import { x } from '../../core/x.ts';",
    "import {\n  y,\n  z,\n} from './b.ts';",
    "export { w } from '../c.ts';",
    "import type { V } from 'slonik';",
    'const m = await import("./d.ts");',
  ].join('\n')), ['src/core/x.ts', 'src/api/routes/b.ts', 'src/api/c.ts', 'src/api/routes/d.ts']);
});

test('core, db and worker never import from src/api', (t) => {
  t.deepEqual(violations((f) => ['src/core', 'src/db', 'src/worker'].some((dir) => under(dir)(f)), under('src/api')), []);
});

test('db never imports from core or worker', (t) => {
  t.deepEqual(violations(under('src/db'), (f) => under('src/core')(f) || under('src/worker')(f)), []);
});

test('no route imports another route', (t) => {
  t.deepEqual(violations(isRoute, isRoute), []);
});

/** The tables the migrations create. */
const tables = readdirSync(path.join(root, 'migrations')).flatMap((file) =>
  [...readFileSync(path.join(root, 'migrations', file), 'utf8').matchAll(/create\s+table\s+(?:if\s+not\s+exists\s+)?([a-z_]+)/gi)]
    .map((match) => match[1]!.toLowerCase()));

/** The tables a text inserts into, updates or deletes from. */
const writtenTables = (text: string) =>
  [...text.matchAll(/\b(?:insert\s+into|update|delete\s+from)\s+([a-z_]+)\b/gi)]
    .map((match) => match[1]!.toLowerCase()).filter((table) => tables.includes(table));

/**
 * Writes still outside their table's module, each with its reason. Retry and cancel update
 * deliveries from db/webhook-jobs.ts until they become SQL functions (issue 12 point 2).
 */
const KNOWN_ELSEWHERE = new Set(['src/db/webhook-jobs.ts writes deliveries']);

test('every table written from TypeScript is written in its own db/ module only', (t) => {
  t.true(tables.includes('endpoint_event_types') && tables.includes('webhook_jobs'), `tables read: ${tables.join(', ')}`);
  t.deepEqual(writtenTables('update endpoints e set x = 1; delete from endpoint_event_types; insert into api_keys (id)'),
    ['endpoints', 'endpoint_event_types', 'api_keys']);
  const misplaced = sourceFiles().flatMap((file) =>
    writtenTables(readFileSync(path.join(root, file), 'utf8'))
      .filter((table) => file !== `src/db/${table.replaceAll('_', '-')}.ts`)
      .map((table) => `${file} writes ${table}`));
  t.deepEqual([...new Set(misplaced)].filter((line) => !KNOWN_ELSEWHERE.has(line)), []);
});
