// Endpoints: every endpoint of the organization (filters: status, failing), and an endpoint's
// page: its health (status, failures in a row, why it is disabled, success rate, 24 h chart),
// pause/resume, reset circuit, recover failed deliveries since a time, delete (restore is on
// its application's page), and its attempt log with each response body.
import { useState } from 'preact/hooks';
import { query, type AttemptList, type Endpoint, type EndpointList, type Stats } from './api.ts';
import { AttemptsPerMinute } from './charts.tsx';
import { Action, hashParams, Loaded, NeedsScope, setHashParams, useLoad, useSession } from './session.tsx';
import { CursorPager, ErrorNotice, Field, fieldError, formatTime, Names, Notice, Pager, shownUrl, StatusBadge, TypeName, useAction, useCursorPages, When } from '../shared/ui.tsx';

export function EndpointsPage() {
  const { client, can } = useSession();
  const params = hashParams();
  const status = params.get('status') ?? '';
  const failing = params.get('failing') ?? '';
  const page = Number(params.get('page') ?? 1) || 1;
  const list = useLoad(() => can('endpoints:read')
    ? client<EndpointList>('GET', `/v1/endpoints${query({ status, failing, page, per_page: 25 })}`) : Promise.resolve(null), [status, failing, page]);
  if (!can('endpoints:read')) return <><h1>Endpoints</h1><NeedsScope need="endpoints:read" what="endpoints" /></>;
  const FILTERS: Array<[string, string, Record<string, string>]> = [
    ['all', 'All', {}], ['active', 'Active', { status: 'active' }], ['failing', 'Failing', { status: 'active', failing: 'true' }],
    ['paused', 'Paused', { status: 'paused' }], ['disabled', 'Disabled', { status: 'disabled' }],
  ];
  const chosen = failing === 'true' ? 'failing' : status || 'all';
  return (
    <>
      <h1>Endpoints</h1>
      <section class="card">
        <div class="segmented" role="group" aria-label="Show">
          {FILTERS.map(([id, label, filter]) => (
            <button key={id} type="button" aria-pressed={chosen === id} onClick={() => setHashParams('endpoints', filter)}>{label}</button>
          ))}
        </div>
        <Loaded state={list}>{(l) => l && (l.data.length === 0 ? <p class="empty">No endpoints here.</p> : (
          <>
            <table class="list">
              <caption class="visually-hidden">Endpoints</caption>
              <thead><tr><th scope="col">URL</th><th scope="col">Application</th><th scope="col">Status</th><th scope="col">Failures in a row</th><th scope="col">Event types</th><th scope="col">Created</th></tr></thead>
              <tbody>{l.data.map((e) => (
                <tr key={e.id}>
                  <td class="url"><a href={`#/endpoints/${e.id}`}>{shownUrl(e.url)}</a></td>
                  <td><a href={`#/applications/${e.application_id}`}><code>{e.application_id}</code></a></td>
                  <td><StatusBadge status={e.status} /></td><td>{e.failure_count}</td>
                  <td class="types"><Names names={e.event_types} /></td><td><When iso={e.created_at} /></td>
                </tr>
              ))}</tbody>
            </table>
            <Pager page={l.pagination.page} totalPages={l.pagination.total_pages} onPage={(p) => setHashParams('endpoints', { status, failing, page: p })} label="Endpoint pages" />
          </>
        ))}</Loaded>
      </section>
    </>
  );
}

const REASON: Record<string, string> = {
  circuit_breaker: 'its circuit breaker opened after failures in a row; it is probed again after a cooldown',
  gone: 'it answered 410 Gone; it stays disabled until its circuit is reset',
};

function localInput(date: Date): string {
  const pad = (n: number) => String(n).padStart(2, '0');
  return `${date.getFullYear()}-${pad(date.getMonth() + 1)}-${pad(date.getDate())}T${pad(date.getHours())}:${pad(date.getMinutes())}`;
}

export function EndpointDetailPage(props: { id: string }) {
  const { client } = useSession();
  const endpoint = useLoad(() => client<Endpoint>('GET', `/v1/endpoints/${props.id}`), [props.id]);
  const stats = useLoad(() => client<Stats>('GET', `/v1/endpoints/${props.id}/stats`), [props.id]);
  const [flash, setFlash] = useState('');
  const [since, setSince] = useState(() => localInput(new Date(Date.now() - 24 * 3600_000)));
  // Its own action, so that the API's error lands under its field (a review found "The request
  // body is invalid." in a banner at the top of the page, far from the date it was about).
  const recover = useAction(async () => {
    setFlash('');
    const r = await client<{ deliveries: number }>('POST', `/v1/endpoints/${props.id}/recover`, { since: new Date(since).toISOString() });
    setFlash(`Recovering ${r.deliveries} failed deliver${r.deliveries === 1 ? 'y' : 'ies'}: they are sent again.`);
    endpoint.reload();
  });
  const act = useAction(async (what: 'pause' | 'resume' | 'reset' | 'delete') => {
    setFlash('');
    if (what === 'pause' || what === 'resume') {
      await client('PATCH', `/v1/endpoints/${props.id}`, { status: what === 'pause' ? 'paused' : 'active' });
      setFlash(what === 'pause' ? 'Endpoint paused: deliveries are held until it is resumed.' : 'Endpoint resumed.');
    } else if (what === 'reset') {
      // The API's words: a disabled endpoint is active again; an active one has its count reset.
      setFlash((await client<{ message: string }>('POST', `/v1/endpoints/${props.id}/reset-circuit`)).message);
    } else {
      if (!window.confirm('Delete this endpoint? It can be restored from its application\'s page for 30 days.')) return;
      const app = endpoint.data?.application_id;
      await client('DELETE', `/v1/endpoints/${props.id}`);
      // Its application's page says so, above the list it can be restored from.
      window.location.hash = `#/applications/${app}?deleted=${props.id}`;
      return;
    }
    endpoint.reload();
  });
  return (
    <>
      <p class="back"><a href="#/endpoints">← Endpoints</a></p>
      <Loaded state={endpoint}>{(e) => (
        <>
          <div class="page-head">
            <div>
              <h1 class="url">{shownUrl(e.url)}</h1>
              <p class="meta"><code>{e.id}</code><span>application <a href={`#/applications/${e.application_id}`}><code>{e.application_id}</code></a></span></p>
            </div>
            <div class="actions">
              {e.status === 'paused'
                ? <Action need="endpoints:write" busy={act.busy} onClick={() => void act.run('resume')}>Resume</Action>
                : <Action need="endpoints:write" busy={act.busy} disabled={e.status === 'disabled'} onClick={() => void act.run('pause')}>Pause</Action>}
              <Action need="endpoints:write" busy={act.busy} disabled={e.status === 'paused' || (e.status === 'active' && e.failure_count === 0)} onClick={() => void act.run('reset')}>Reset circuit</Action>
              <Action need="endpoints:write" kind="danger" busy={act.busy} onClick={() => void act.run('delete')}>Delete</Action>
            </div>
          </div>
          {flash && <Notice kind="success">{flash}</Notice>}
          <ErrorNotice error={act.error} />
          <div class="grid2">
            <section class="card" aria-labelledby="health">
              <h2 id="health">Health</h2>
              <dl class="facts">
                <dt>Status</dt><dd><StatusBadge status={e.status} />{e.disabled_reason && <span class="muted"> — {REASON[e.disabled_reason]}</span>}</dd>
                <dt>Failures in a row</dt><dd>{e.failure_count}</dd>
                {e.disabled_at && <><dt>Disabled</dt><dd>{formatTime(e.disabled_at)}</dd></>}
                <dt>Event types</dt><dd>{e.event_types.length ? e.event_types.map((t) => <code key={t}><TypeName name={t} /></code>) : 'none'}</dd>
                <dt>Rate limit</dt><dd>{e.rate_limit_rps} per second</dd>
                <dt>Timeout</dt><dd>{e.timeout_ms / 1000} s</dd>
                <dt>Created</dt><dd>{formatTime(e.created_at)}</dd>
              </dl>
            </section>
            <section class="card" aria-labelledby="ep-chart">
              <h2 id="ep-chart">Attempts, last 24 hours</h2>
              <Loaded state={stats}>{(s) => (
                <>
                  <p class="totals"><span><strong>{s.totals.attempts}</strong> attempts</span><span><strong>{s.totals.failures}</strong> failed</span>
                    <span><strong>{s.totals.attempts ? `${((100 * s.totals.successes) / s.totals.attempts).toFixed(1)}%` : '—'}</strong> succeeded</span></p>
                  <AttemptsPerMinute stats={s} />
                </>
              )}</Loaded>
            </section>
          </div>
          <section class="card" aria-labelledby="recover">
            <h2 id="recover">Recover failed deliveries</h2>
            <p class="muted">Every delivery to this endpoint that gave up since this time (at most 14 days ago) is sent again, in a new 48-hour window.</p>
            <form class="inline" onSubmit={(ev) => { ev.preventDefault(); void recover.run(); }}>
              <Field label="Gave up since" error={fieldError(recover.error, 'since')}>{(id, describedBy) => (
                <input id={id} type="datetime-local" value={since} aria-describedby={describedBy} onInput={(ev) => setSince((ev.target as HTMLInputElement).value)} />
              )}</Field>
              <Action need="endpoints:write" type="submit" busy={recover.busy}>Recover</Action>
            </form>
            {recover.error && !fieldError(recover.error, 'since') && <ErrorNotice error={recover.error} />}
          </section>
          <AttemptLog endpointId={e.id} />
        </>
      )}</Loaded>
    </>
  );
}

function AttemptLog(props: { endpointId: string }) {
  const { client } = useSession();
  const [status, setStatus] = useState('');
  const pages = useCursorPages();
  const cursor = pages.cursor;
  const log = useLoad(() => client<AttemptList>('GET', `/v1/endpoints/${props.endpointId}/attempts${query({ status, limit: 20, cursor })}`), [status, cursor]);
  return (
    <section class="card" aria-labelledby="attempt-log">
      <div class="card-head">
        <h2 id="attempt-log">Attempt log</h2>
        <div class="segmented" role="group" aria-label="Show attempts">
          {[['', 'All'], ['failed', 'Failed'], ['succeeded', 'Succeeded']].map(([value, label]) => (
            <button key={value} type="button" aria-pressed={status === value} onClick={() => { setStatus(value!); pages.first(); }}>{label}</button>
          ))}
          <button type="button" onClick={() => log.reload()}>Refresh</button>
        </div>
      </div>
      <Loaded state={log}>{(l) => l.data.length === 0 ? <p class="empty">No attempts.</p> : (
        <table class="list attempts-table">
          <thead><tr><th scope="col">When</th><th scope="col">Job</th><th scope="col">Event type</th><th scope="col">#</th><th scope="col">Result</th><th scope="col">HTTP</th><th scope="col">Latency</th><th scope="col">Response body</th></tr></thead>
          <tbody>{l.data.map((a) => (
            <tr key={`${a.job_id}-${a.attempted_at}-${a.attempt}`}>
              <td><When iso={a.attempted_at} /></td><td><a href={`#/jobs/${a.job_id}`}><code class="nobreak">{a.job_id}</code></a></td><td><TypeName name={a.event_type} /></td><td>{a.attempt}</td>
              <td class={a.success ? 'ok' : 'failed'}>{a.success ? 'Succeeded' : 'Failed'}</td><td>{a.status_code ?? a.error ?? '—'}</td><td>{a.latency_ms} ms</td>
              <td><pre class="body" tabIndex={0} aria-label="Response body">{a.response_body || '(empty)'}</pre></td>
            </tr>
          ))}</tbody>
        </table>
      )}</Loaded>
      <CursorPager pages={pages} next={log.data?.next_cursor} label="Attempt pages" />
    </section>
  );
}
