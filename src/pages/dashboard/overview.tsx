// Overview: is webhook traffic flowing? Attempts per minute and success rate over 24 h
// (GET /v1/stats), the backlog and endpoint health (GET /v1/summary), jobs that failed, and the
// endpoints that are failing or disabled, each linked to its page.
import { useState } from 'preact/hooks';
import type { EndpointList, JobList, Stats, Summary } from './api.ts';
import { AttemptsPerMinute, SuccessRate } from './charts.tsx';
import { Loaded, NeedsScope, useLoad, useSession } from './session.tsx';
import { shownUrl, StatusBadge, useWhileShown } from '../shared/ui.tsx';

/** How often the overview reads its figures again on its own. */
const OVERVIEW_REFRESH_MS = 60_000;

export function Overview() {
  const { client, can } = useSession();
  const readEndpoints = can('endpoints:read');
  // The statistics (stats, summary) are read with endpoints:read or applications:read.
  const readStats = readEndpoints || can('applications:read');
  const [hours, setHours] = useState(24);
  // Read again by the Refresh button, and every minute while the tab is shown: it kept the
  // figures of its first load (a review found it 20 attempts behind /v1/stats).
  const [round, setRound] = useState(0);
  useWhileShown(OVERVIEW_REFRESH_MS, () => setRound((n) => n + 1));
  const stats = useLoad(() => readStats
    ? client<Stats>('GET', `/v1/stats${hours === 24 ? '' : `?since=${new Date(Date.now() - hours * 3600_000).toISOString()}`}`) : Promise.resolve(null), [hours, round]);
  const summary = useLoad(() => readStats ? client<Summary>('GET', '/v1/summary') : Promise.resolve(null), [round]);
  const failing = useLoad(() => readEndpoints ? client<EndpointList>('GET', '/v1/endpoints?status=active&failing=true&per_page=10') : Promise.resolve(null), [round]);
  const disabled = useLoad(() => readEndpoints ? client<EndpointList>('GET', '/v1/endpoints?status=disabled&per_page=10') : Promise.resolve(null), [round]);
  const failedJobs = useLoad(() => can('webhooks:read') ? client<JobList>('GET', '/v1/webhook-jobs?status=failed&per_page=1') : Promise.resolve(null), [round]);
  const retrying = useLoad(() => can('webhooks:read') ? client<JobList>('GET', '/v1/webhook-jobs?status=awaiting_retry&per_page=1') : Promise.resolve(null), [round]);

  return (
    <>
      <div class="page-head">
        <h1>Overview</h1>
        <button type="button" onClick={() => setRound((n) => n + 1)}>Refresh</button>
      </div>
      {!readStats && <NeedsScope need="endpoints:read" what="delivery statistics, the backlog or endpoint health" />}
      {readStats && (
        <>
          <div class="segmented" role="group" aria-label="Period of the charts">
            {[[24, 'Last 24 hours'], [1, 'Last hour']].map(([h, label]) => (
              <button key={h} type="button" aria-pressed={hours === h} onClick={() => setHours(h as number)}>{label}</button>
            ))}
          </div>
          <section class="tiles" aria-label="At a glance">
            <Loaded state={stats}>{(s) => s && (
              <>
                <Tile label={`Attempts (${period(s)})`} value={s.totals.attempts} />
                <Tile label={`Success rate (${period(s)})`} value={s.totals.attempts ? `${((100 * s.totals.successes) / s.totals.attempts).toFixed(1)}%` : '—'}
                  tone={s.totals.attempts && s.totals.failures / s.totals.attempts > 0.05 ? 'bad' : ''} />
              </>
            )}</Loaded>
            <Loaded state={summary}>{(s) => s && (
              <>
                <Tile label="Backlog" value={s.deliveries.pending + s.deliveries.in_flight + s.deliveries.held}
                  detail={`${s.deliveries.pending} pending · ${s.deliveries.in_flight} in flight · ${s.deliveries.held} held`} />
                <Tile label="Endpoints" value={s.endpoints.total}
                  detail={`${s.endpoints.active} active · ${s.endpoints.paused} paused · ${s.endpoints.disabled} disabled`}
                  tone={s.endpoints.disabled ? 'bad' : ''} />
              </>
            )}</Loaded>
            <Loaded state={failedJobs}>{(j) => j && (
              <Tile label="Failed jobs" value={j.pagination.total} href="#/jobs?status=failed" tone={j.pagination.total ? 'bad' : ''}
                detail={retrying.data ? `${retrying.data.pagination.total} awaiting retry` : undefined} />
            )}</Loaded>
          </section>
          <div class="grid2">
            <section class="card" aria-labelledby="chart-attempts">
              <h2 id="chart-attempts">Attempts per minute</h2>
              <Loaded state={stats}>{(s) => s && <AttemptsPerMinute stats={s} />}</Loaded>
            </section>
            <section class="card" aria-labelledby="chart-rate">
              <h2 id="chart-rate">Success rate</h2>
              <Loaded state={stats}>{(s) => s && <SuccessRate stats={s} />}</Loaded>
            </section>
          </div>
          {readEndpoints ? (
            <div class="grid2">
              <EndpointTable title="Failing endpoints" empty="No endpoint is failing." state={failing} />
              <EndpointTable title="Disabled endpoints" empty="No endpoint is disabled." state={disabled} />
            </div>
          ) : <NeedsScope need="endpoints:read" what="which endpoints are failing or disabled" />}
        </>
      )}
    </>
  );
}

/**
 * The period an answer of /v1/stats covers, from the answer itself: labelled from the chosen
 * period, the tiles said "(1 h)" over the 24 hours' figures while the hour's answer was on its
 * way (a probe).
 */
const period = (s: Stats) => (Date.parse(s.until) - Date.parse(s.since) > 2 * 3_600_000 ? '24 h' : '1 h');

function Tile(props: { label: string; value: number | string; detail?: string | undefined; tone?: string | number; href?: string }) {
  // Counts with thousands separators, as the charts' axes write them.
  const value = <strong class={`tile-value ${props.tone ? 'bad' : ''}`}>{typeof props.value === 'number' ? props.value.toLocaleString() : props.value}</strong>;
  return (
    <div class="tile card">
      <p class="tile-label">{props.label}</p>
      {props.href ? <a href={props.href}>{value}</a> : value}
      {props.detail && <p class="tile-detail">{props.detail}</p>}
    </div>
  );
}

function EndpointTable(props: { title: string; empty: string; state: { data?: EndpointList | null; error?: unknown; loading: boolean } }) {
  const id = props.title.toLowerCase().replace(/\W+/g, '-');
  return (
    <section class="card" aria-labelledby={id}>
      <h2 id={id}>{props.title}</h2>
      <Loaded state={props.state}>{(list) => list && (list.data.length === 0 ? <p class="empty">{props.empty}</p> : (
        <table class="list">
          <thead><tr><th scope="col">Endpoint</th><th scope="col">Status</th><th scope="col">Failures in a row</th></tr></thead>
          <tbody>
            {list.data.map((e) => (
              <tr key={e.id}>
                <td class="url"><a href={`#/endpoints/${e.id}`}>{shownUrl(e.url)}</a></td>
                <td><StatusBadge status={e.status} /></td>
                <td>{e.failure_count}</td>
              </tr>
            ))}
          </tbody>
        </table>
      ))}</Loaded>
      {props.state.data && props.state.data.pagination.total > props.state.data.data.length && (
        <p><a href={`#/endpoints?${props.title.startsWith('Failing') ? 'failing=true' : 'status=disabled'}`}>All {props.state.data.pagination.total}</a></p>
      )}
    </section>
  );
}
