// The endpoint's attempts and success rate over the last 24 hours (GET /v1/endpoints/{id}/stats).
import { useEffect, useMemo, useState } from 'preact/hooks';
import type { Client, Stats } from './api.ts';
import { AttemptsChart, type Point } from '../shared/chart.tsx';
import { Busy, ErrorNotice } from '../shared/ui.tsx';

/** Percent of the attempts that succeeded (of at least one attempt), unrounded: the panel's and the endpoint header's one figure. */
export const successRate = (counts: { attempts: number; successes: number }): number => (100 * counts.successes) / counts.attempts;

/** `onTotals`: each read's totals. The default window is the one `success_rate` counts (docs/api.md: the
 * minutes after 24 hours ago), so successes / attempts is the endpoint's success rate. */
export function StatsPanel(props: { client: Client; endpointId: string; refresh: number; onTotals?: (totals: Stats['totals']) => void }) {
  const [stats, setStats] = useState<Stats | null>(null);
  const [error, setError] = useState<unknown>(null);
  useEffect(() => {
    let live = true;
    props.client<Stats>('GET', `/v1/endpoints/${props.endpointId}/stats`)
      .then((result) => {
        if (!live) return;
        setError(null);
        props.onTotals?.(result.totals);
        // Redraw the chart only when a bucket changed (the page refreshes every few seconds).
        setStats((current) => (current && JSON.stringify(current.data) === JSON.stringify(result.data) ? current : result));
      }, (caught) => { if (live) setError(caught); });
    return () => { live = false; };
  }, [props.endpointId, props.refresh]);
  // Hourly bars over the whole window (the API's minute buckets added up, empty hours as 0), so
  // the chart always spans the last 24 hours and one attempt is a visible bar.
  const points: Point[] = useMemo(() => {
    if (!stats) return [];
    const hour = (iso: string) => Math.floor(Date.parse(iso) / 3_600_000) * 3600;
    const slots = new Map<number, { attempts: number; successes: number }>();
    for (let t = hour(stats.since); t <= hour(stats.until); t += 3600) slots.set(t, { attempts: 0, successes: 0 });
    for (const bucket of stats.data) {
      const slot = slots.get(hour(bucket.start));
      if (slot) { slot.attempts += bucket.attempts; slot.successes += bucket.successes; }
    }
    return [...slots].map(([time, slot]) => ({ time, attempts: slot.attempts || null, successRate: slot.attempts ? successRate(slot) : null }));
  }, [stats]);
  const totals = stats?.totals;
  const rate = totals && totals.attempts ? successRate(totals) : null;
  return (
    <section class="card" aria-labelledby="stats-title">
      <h2 id="stats-title" class="sub">Last 24 hours</h2>
      {error ? <ErrorNotice error={error} /> : !stats ? <Busy label="Loading statistics…" /> : (
        <>
          {totals!.attempts > 0 && <p class="totals">
            <span><strong>{totals!.attempts}</strong> {totals!.attempts === 1 ? 'attempt' : 'attempts'}</span>
            <span><strong>{totals!.failures}</strong> failed</span>
            <span><strong>{rate === null ? '—' : `${rate.toFixed(1)}%`}</strong> success rate</span>
          </p>}
          {totals!.attempts === 0 ? <p class="empty">No attempts in the last 24 hours.</p> : (
            <>
              <AttemptsChart points={points} legend={false}
                label={`Attempts per hour over the last 24 hours: ${totals!.attempts} ${totals!.attempts === 1 ? 'attempt' : 'attempts'}, ${totals!.failures} failed.`} />
              <p class="chart-legend" aria-hidden="true"><span class="key key-attempts" /> Attempts per hour <span class="key key-rate" /> Success rate</p>
            </>
          )}
        </>
      )}
    </section>
  );
}
