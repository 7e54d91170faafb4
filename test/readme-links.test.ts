// The repository stands alone: README.md and docs/*.md never link or name a path outside it, and
// every relative link they make points at a file that is in it.
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import test from 'ava';
import { ROOT } from './helpers/process.ts';

const documents = ['README.md', ...readdirSync(path.join(ROOT, 'docs')).filter((name) => name.endsWith('.md')).map((name) => `docs/${name}`)];

for (const document of documents) {
  test(`${document} names no path outside the repository`, (t) => {
    const text = readFileSync(path.join(ROOT, document), 'utf8');
    const outside = text.split('\n')
      .map((line, index) => ({ line, number: index + 1 }))
      .filter(({ line }) => line.includes('../') || /(^|[\s(`'"])\/(work|home|tmp|root)\//.test(line))
      .map(({ line, number }) => `${document}:${number}: ${line.trim()}`);
    t.deepEqual(outside, []);
  });

  test(`${document}: every relative link points at a file of the repository`, (t) => {
    const text = readFileSync(path.join(ROOT, document), 'utf8');
    const targets = [...text.matchAll(/\]\(([^)\s]+)\)/g)].map((match) => match[1]!)
      .filter((target) => !/^[a-z][a-z0-9+.-]*:/i.test(target) && !target.startsWith('#'));
    for (const target of targets) {
      const file = path.resolve(ROOT, path.dirname(document), target.split('#')[0]!);
      t.true(file.startsWith(`${ROOT}${path.sep}`) && existsSync(file), `${document} links ${target}`);
    }
    t.pass();
  });
}

test('the API contract is in the repository, and the README links it', (t) => {
  t.true(documents.includes('docs/api.md'));
  t.true(readFileSync(path.join(ROOT, 'README.md'), 'utf8').includes('](docs/api.md)'));
});
