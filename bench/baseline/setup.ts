// The baseline's database on the bench's server: created beside the bench's own database, the
// schema of schema.sql, and `orgs` organizations each with an API key, an application and one
// endpoint at the receiver subscribed to `eventType` (as the bench's fixtures for the service).
import { createHash, randomBytes } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import pg from 'pg';

export type BaselineFixture = { orgId: string; key: string; applicationId: string; endpointId: string };

/** Creates the database `name` next to `url`'s and fills it; returns its URL and the fixtures. */
export async function setUpBaseline(url: string, name: string, receiverPort: number, orgs: number, eventType: string) {
  const admin = new pg.Client({ connectionString: url });
  await admin.connect();
  await admin.query(`create database ${name}`);
  await admin.end();
  const baselineUrl = new URL(url);
  baselineUrl.pathname = `/${name}`;
  const db = new pg.Client({ connectionString: baselineUrl.toString() });
  await db.connect();
  try {
    await db.query(await readFile(new URL('schema.sql', import.meta.url), 'utf8'));
    const fixtures: BaselineFixture[] = [];
    for (let i = 0; i < orgs; i += 1) {
      const f = { orgId: `org_${i}`, key: `sk_live_${randomBytes(16).toString('hex')}`, applicationId: `app_${i}`, endpointId: `ep_${i}` };
      await db.query('insert into api_keys values ($1, $2)', [createHash('sha256').update(f.key).digest('hex'), f.orgId]);
      await db.query('insert into applications values ($1, $2)', [f.applicationId, f.orgId]);
      await db.query('insert into endpoints values ($1, $2, $3, $4, $5)',
        [f.endpointId, f.applicationId, `http://127.0.0.1:${receiverPort}/hook`, `whsec_${randomBytes(32).toString('hex')}`, [eventType]]);
      fixtures.push(f);
    }
    return { url: baselineUrl.toString(), fixtures };
  } finally {
    await db.end();
  }
}
