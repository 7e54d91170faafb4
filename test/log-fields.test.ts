// A log line's own fields never repeat the ones every line carries (src/logger.ts: level, time,
// pid, msg): a worker waiting for another process to start the embedded PostgreSQL logged
// `"pid":18502,"pid":18499`, and a JSON reader keeping the last one put the line on the other
// process (a probe). Read from the source: each logger call's first object literal.
import test from 'ava';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const RESERVED = ['level', 'time', 'pid', 'msg', 'hostname'];

test('no logger call in src/ binds a field every log line already has', (t) => {
  const files = readdirSync(path.join(root, 'src'), { recursive: true, encoding: 'utf8' }).filter((f) => f.endsWith('.ts') || f.endsWith('.tsx'));
  const calls = /\b(?:logger|log)\.(?:trace|debug|info|warn|error|fatal|child)\(\s*\{([^{}]*)\}/g;
  const found: string[] = [];
  let seen = 0;
  for (const file of files) {
    const text = readFileSync(path.join(root, 'src', file), 'utf8');
    for (const match of text.matchAll(calls)) {
      seen++;
      const keys = [...match[1]!.matchAll(/(?:^|,)\s*([A-Za-z_$][\w$]*)\s*(?::|,|$)/g)].map((k) => k[1]!);
      for (const key of keys) if (RESERVED.includes(key)) found.push(`${file}: ${key} in {${match[1]!.trim()}}`);
    }
  }
  t.true(seen > 50, `the pattern finds the logger calls (${seen})`);
  t.deepEqual(found, []);
});
