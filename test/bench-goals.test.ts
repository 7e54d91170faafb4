// The bench's goals (bench/goals.ts): each verdict, and beside it what the same run measured of
// the machine's own limit on the figure (the floors, the disk), which the printed table shows.
import test from 'ava';
import { goalRows, GOALS, judge } from '../bench/goals.ts';

/** A report with every figure the goals name, at `value`, and the sections the limits read. */
function report(value: number, extra: Record<string, Record<string, unknown>> = {}): Record<string, unknown> {
  const sections: Record<string, Record<string, unknown>> = {};
  for (const { path: [section, name] } of GOALS) (sections[section] ??= {})[name] = value;
  for (const [section, figures] of Object.entries(extra)) Object.assign(sections[section] ??= {}, figures);
  return sections;
}

test('each goal is judged against its bound, and a figure the run could not measure is not met', (t) => {
  const p99 = (verdicts: ReturnType<typeof judge>) => verdicts.find((v) => v.metric === 'latency.p99_ms');
  t.true(p99(judge(report(60)))?.met);
  t.false(p99(judge(report(61)))?.met);
  const rate = judge(report(4000)).find((v) => v.metric === 'delivery.deliveries_per_second');
  t.true(rate?.met);
  t.false(judge(report(3999)).find((v) => v.metric === 'delivery.deliveries_per_second')?.met);
  const unmeasured = { ...report(1), delivery: { ...report(1).delivery as object, worker_and_database_cpu_us_per_delivery: null } };
  t.false(judge(unmeasured).find((v) => v.metric === 'delivery.worker_and_database_cpu_us_per_delivery')?.met);
  t.throws(() => judge({}), { message: /the report has no figure/ });
});

test('beside a rate, a CPU cost or the p99, the same run\'s floor or the disk\'s longest sync', (t) => {
  const verdicts = judge(report(1, {
    accept_floor: { jobs_per_second: 3170, ratio_to_bare_express: 0.201, web_cpu_us_per_job: 134 },
    delivery_floor: { deliveries_per_second: 5877, process_cpu_us_per_delivery: 87, database_cpu_us_per_delivery: 148 },
    latency: { disk_syncs: { max_ms: 147.93 } },
  }));
  const beside = Object.fromEntries(verdicts.filter((v) => v.beside).map((v) => [v.metric, v.beside?.value]));
  t.deepEqual(beside, {
    'latency.p99_ms': 147.93,
    'accept.jobs_per_second': 3170,
    'accept.ratio_to_bare_express': 0.201,
    'delivery.deliveries_per_second': 5877,
    'accept.web_cpu_us_per_job': 134,
    'delivery.worker_and_database_cpu_us_per_delivery': 235,
  });
  // A run without them (no disk probe on a DATABASE_URL server, no floor's database CPU there).
  const without = judge(report(1, { latency: { disk_syncs: null }, delivery_floor: { database_cpu_us_per_delivery: null } }));
  t.is(without.find((v) => v.metric === 'latency.p99_ms')?.beside?.value, null);
  t.is(without.find((v) => v.metric === 'delivery.worker_and_database_cpu_us_per_delivery')?.beside?.value, null);
  const rows = goalRows(without);
  t.is(rows['creation to first attempt at 300 jobs/s, p99 (ms)']?.['this run allowed'], 'the disk\'s longest sync in the phase (ms): not measured');
  t.is(rows['peak RSS, web (MB)']?.['this run allowed'], '');
});
