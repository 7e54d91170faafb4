// The test files of a directory of test/ (test/webhook-jobs/*.test.ts, ...) run in one process:
// test/<directory>.test.ts imports them all, and ava sees that file alone (package.json's
// `files` takes test/*.test.ts). A process of its own for each cost about 2 s of CPU (Node and
// ava starting, the service's modules loaded, their code run cold) and the run had ~160 of them
// on 2 cores; the files of a directory are small API tests of one resource. In the one process
// their tests keep ava's rules for one file: every file's serial tests first, one at a time,
// then every concurrent test at once; `before` hooks before them and `after` hooks after them
// all, so a file must not use beforeEach/afterEach (they would run around every other file's
// tests too), and each title must be unique across the directory (ava refuses a duplicate).
// Each file has its own instance of the directory's other modules (isolateHelpers, below).
//
// TEST_MODULES, set by test/run.ts when it is given files of such a directory
// (`npm test -- test/webhook-jobs/create.test.ts`), limits the import to those files.
import { existsSync, readdirSync } from 'node:fs';
import { registerHooks } from 'node:module';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const TEST_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

/**
 * What runs `target` (a path given to `npm test`) in its directory's process: the directory's
 * test/<directory>.test.ts, and the test file asked for (null: the whole directory); null when
 * `target` is neither such a directory nor a test file in one.
 */
export function aggregateOf(target: string): { aggregate: string; file: string | null } | null {
  const resolved = path.resolve(target);
  const directory = resolved.endsWith('.test.ts') ? path.dirname(resolved) : resolved;
  const aggregate = `${directory}.test.ts`;
  if (path.dirname(directory) !== TEST_ROOT || !existsSync(resolved) || !existsSync(aggregate)) return null;
  return { aggregate, file: directory === resolved ? null : resolved };
}

/** Imports the test files of the directory named as the calling test file, next to it (those of them TEST_MODULES names, if it names any). */
export async function importDirectory(aggregatorUrl: string): Promise<void> {
  const aggregator = fileURLToPath(aggregatorUrl);
  const directory = aggregator.replace(/\.test\.ts$/, '');
  const files = readdirSync(directory).filter((name) => name.endsWith('.test.ts')).sort().map((name) => path.join(directory, name));
  const chosen = (process.env.TEST_MODULES ?? '').split(',').filter((file) => files.includes(file));
  isolateHelpers(pathToFileURL(directory).href);
  for (const file of chosen.length > 0 ? chosen : files) await import(pathToFileURL(file).href);
}

/**
 * Each test file gets its own instance of the directory's other modules (helpers.ts, with its
 * test app and database), as it had in a process of its own: tests that change their database
 * (a function's lock timeout, rows counted across the database) or a helper's state keep to
 * their own file. Modules outside the directory (test/helpers/, src/) are shared, as any
 * process shares them.
 */
function isolateHelpers(directoryUrl: string): void {
  const inside = (url: string) => url.startsWith(`${directoryUrl}/`);
  registerHooks({
    resolve(specifier, context, nextResolve) {
      const resolved = nextResolve(specifier, context);
      const parent = context.parentURL;
      if (!parent || !inside(parent) || !inside(resolved.url) || resolved.url.endsWith('.test.ts')) return resolved;
      const parentUrl = new URL(parent);
      const owner = parentUrl.pathname.endsWith('.test.ts') ? path.basename(parentUrl.pathname) : parentUrl.searchParams.get('for');
      if (!owner) return resolved;
      const url = new URL(resolved.url);
      url.searchParams.set('for', owner);
      return { ...resolved, url: url.href };
    },
  });
}
