// DATABASE_URL's TLS settings as docs/deploy.md gives them, against a PostgreSQL that takes TLS
// connections only (hostssl) with a self-signed certificate. The processes' pools read the URL
// as node-postgres does, as the release step's migrations do: with slonik's parser the release
// passed and every web and worker process failed at start on `sslmode=verify-full` (a probe),
// and `uselibpqcompat` and `sslrootcert` were dropped.
import { rm } from 'node:fs/promises';
import test from 'ava';
import { sql } from 'slonik';
import { z } from 'zod';
import { ConfigError, loadConfig } from '../src/config.ts';
import { migrate } from '../src/db/migrate.ts';
import { makePool } from '../src/db/pool.ts';
import { makeLogger } from '../src/logger.ts';
import { startCluster, tempDir, type Cluster } from './helpers/cluster.ts';

let root = '';
let cluster: Cluster | undefined;
test.before(async () => {
  root = await tempDir('tls');
  cluster = await startCluster(root, 'tls', {}, { tls: true });
});
test.after.always(async () => {
  await cluster?.destroy();
  if (root) await rm(root, { recursive: true, force: true }); // the CA file beside the cluster
});

const withQuery = (query: string) => `${cluster!.url}?${query}`;

/** Whether the pool's connection is encrypted, as the server sees it. */
async function encrypted(url: string): Promise<boolean> {
  const pool = await makePool(url, { maximumPoolSize: 1, acquireTimeoutMs: 10_000 });
  try {
    return await pool.oneFirst(sql.type(z.object({ ssl: z.boolean() }))`select ssl from pg_stat_ssl where pid = pg_backend_pid()`);
  } finally {
    await pool.end();
  }
}

const CA = '<the CA file>';
for (const query of [
  `sslmode=verify-full&sslrootcert=${CA}`,
  'uselibpqcompat=true&sslmode=require',
  `sslmode=require&sslrootcert=${CA}`,
  'sslmode=no-verify',
]) {
  test.serial(`the processes' pool connects over TLS with ?${query}`, async (t) => {
    t.true(await encrypted(withQuery(query.replace(CA, encodeURIComponent(cluster!.ca!)))));
  });
}

test.serial('sslmode=verify-full without the CA refuses the self-signed certificate: the pool verifies', async (t) => {
  const error = await t.throwsAsync(encrypted(withQuery('sslmode=verify-full')));
  t.regex(String(error?.message) + String((error as { cause?: unknown })?.cause ?? ''), /self[- ]signed certificate/i);
});

test.serial('the release step (migrations) and the pool take the same verify-full URL', async (t) => {
  const url = withQuery(`sslmode=verify-full&sslrootcert=${encodeURIComponent(cluster!.ca!)}`);
  await migrate(url, makeLogger('silent'));
  t.true(await encrypted(url));
});

test('a DATABASE_URL naming a CA file that is not there stops the start with a message naming the file', (t) => {
  const error = t.throws(() => loadConfig({ DATABASE_URL: 'postgres://u:p@db.example.com/x?sslmode=verify-full&sslrootcert=/nowhere/ca.pem' }), { instanceOf: ConfigError });
  t.regex(String(error?.message), /DATABASE_URL: URL: ENOENT: no such file or directory, open '\/nowhere\/ca\.pem'/);
});
