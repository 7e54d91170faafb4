// Recording a batch reads the batch's deliveries, not the endpoint's backlog, whatever the
// planner's statistics say. Right after an outage's release the statistics still say the
// endpoint has few pending deliveries (they were analyzed while held), and a status condition
// in a join lets the planner read all of them through the partial index of open deliveries for
// every batch: a 20,000-delivery drain ran at a third of its rate (issue 12's bench --quick).
// The count of index tuples read is exact and needs no timing: this fails on that plan. Nor
// does it scan the whole table, which the planner chose while the table was small.
import test from 'ava';
import { startTestApp } from './helpers/app.ts';
import { flushedStats, insertPlanJobs, planFixture } from './helpers/plans.ts';

const app = startTestApp();
const BACKLOG = 5000;
const BATCH = 20;

test('record_attempts reads a batch by primary key, not the endpoint\'s pending backlog, with statistics from before a release', async (t) => {
  const fixture = await planFixture(t, app);
  const { endpointId, db } = fixture;
  // An outage's backlog, held and analyzed as such; then released (pending), as un-pausing does.
  await insertPlanJobs(fixture, BACKLOG, 'held');
  await db.query('analyze webhook_jobs; analyze deliveries');
  await db.query(`update deliveries set status = 'pending', next_attempt_at = now() where endpoint_id = $1`, [endpointId]);

  const { rows: batch } = await db.query<{ id: string; round: number }>(
    `update deliveries set status = 'in_flight' where id in (select id from deliveries where endpoint_id = $1 order by id limit $2)
     returning id, round`, [endpointId, BATCH]);
  const results = batch.map((d, i) => {
    const success = i % 2 === 0; // successes and failures that go back to pending, retried in a minute
    return {
      delivery_id: Number(d.id), round: d.round, attempt: 1, status_code: success ? 200 : 500, response_body: '', latency_ms: 5,
      attempted_at: new Date().toISOString(), success, error: success ? null : 'http_status',
      retry_at: success ? null : new Date(Date.now() + 60_000).toISOString(),
    };
  });

  const tuplesRead = async () => {
    const row = await flushedStats<{ index: string; seq: string }>(db,
      `select (select idx_tup_read from pg_stat_user_indexes where indexrelname = 'deliveries_endpoint_id_status_idx')::text as index,
              (select seq_tup_read from pg_stat_user_tables where relname = 'deliveries')::text as seq`);
    return { index: Number(row.index), seq: Number(row.seq) };
  };
  const before = await tuplesRead();
  const { rows: returned } = await db.query<{ delivery_id: string | null }>(
    'select delivery_id::text from record_attempts($1::jsonb, 5, 30) where circuit is null', [JSON.stringify(results)]);
  const after = await tuplesRead();
  const read = after.index - before.index;

  t.deepEqual(returned.map((r) => r.delivery_id).sort(), results.filter((r) => !r.success).map((r) => String(r.delivery_id)).sort(),
    'the failures are returned to enqueue their retries');
  t.true(read < BACKLOG / 10, `the batch of ${BATCH} read ${read} tuples of the index of open deliveries (backlog ${BACKLOG})`);
  // A table this small is where the planner, blind to the batch's size (the outcomes have no
  // statistics), hashed a sequential scan of every delivery to update the batch's; and
  // it answered "any held delivery?" with one too, with statistics that still said all were held.
  t.is(after.seq - before.seq, 0, 'no delivery is read by a sequential scan');
});
