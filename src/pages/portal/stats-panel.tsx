// The endpoint's attempts and success rate over the last 24 hours (GET /v1/endpoints/{id}/stats).
import { useEffect, useState } from 'preact/hooks';
import type { Client, Stats } from './api.ts';
import { AttemptsChart, type Point } from '../shared/chart.tsx';
import { Busy, ErrorNotice } from '../shared/ui.tsx';

export function StatsPanel(props: { client: Client; endpointId: string; refresh: number }) {
  const [stats, setStats] = useState<Stats | null>(null);
  const [error, setError] = useState<unknown>(null);
  useEffect(() => {
    let live = true;
    props.client<Stats>('GET', `/v1/endpoints/${props.endpointId}/stats`)
      .then((result) => { if (live) setStats(result); }, (caught) => { if (live) setError(caught); });
    return () => { live = false; };
  }, [props.endpointId, props.refresh]);
  const points: Point[] = (stats?.data ?? []).map((bucket) => ({
    time: Date.parse(bucket.start) / 1000,
    attempts: bucket.attempts,
    successRate: bucket.attempts ? (100 * bucket.successes) / bucket.attempts : null,
  }));
  const totals = stats?.totals;
  const rate = totals && totals.attempts ? (100 * totals.successes) / totals.attempts : null;
  return (
    <section class="card" aria-labelledby="stats-title">
      <h3 id="stats-title">Last 24 hours</h3>
      {error ? <ErrorNotice error={error} /> : !stats ? <Busy label="Loading statistics…" /> : (
        <>
          <p class="totals">
            <span><strong>{totals!.attempts}</strong> attempts</span>
            <span><strong>{totals!.failures}</strong> failed</span>
            <span><strong>{rate === null ? '—' : `${rate.toFixed(1)}%`}</strong> success rate</span>
          </p>
          {points.length === 0 ? <p class="empty">No attempts in the last 24 hours.</p> : (
            <AttemptsChart points={points} label={`Attempts per ${stats.bucket}: ${totals!.attempts} attempts, ${totals!.failures} failed.`} />
          )}
        </>
      )}
    </section>
  );
}
