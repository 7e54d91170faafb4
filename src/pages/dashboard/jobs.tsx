// Jobs: the organization's jobs with the API's filters (status, event type, application,
// endpoint, created between), kept in the address; a job's detail with its payload and every
// delivery attempt (status, code, latency, response body), retry and cancel.
import { useState } from 'preact/hooks';
import { query, type Job, type JobList } from './api.ts';
import { JobTable } from './applications.tsx';
import { Action, hashParams, JobStatus, JOB_STATUS_TEXT, Loaded, NeedsScope, setHashParams, useLoad, useRouteDraft, useSession } from './session.tsx';
import { ErrorNotice, Field, fieldError, formatTime, Notice, Pager, useAction, useWhileShown, When } from '../shared/ui.tsx';

const FILTERS = ['status', 'event_type', 'application_id', 'endpoint_id', 'created_after', 'created_before'] as const;

export function JobsPage() {
  const { client, can } = useSession();
  const params = hashParams();
  const current = Object.fromEntries(FILTERS.map((f) => [f, params.get(f) ?? ''])) as Record<(typeof FILTERS)[number], string>;
  const page = Number(params.get('page') ?? 1) || 1;
  const [form, setForm] = useRouteDraft(current);
  const key = JSON.stringify([current, page]);
  const list = useLoad(() => can('webhooks:read')
    ? client<JobList>('GET', `/v1/webhook-jobs${query({ ...current, page, per_page: 25 })}`) : Promise.resolve(null), [key]);
  if (!can('webhooks:read')) return <><h1>Jobs</h1><NeedsScope need="webhooks:read" what="webhook jobs" /></>;
  const set = (name: string) => (e: Event) => setForm({ ...form, [name]: (e.target as HTMLInputElement).value });
  // The API's refusal of a filter, under that filter (it was only "The query string is invalid." above the list).
  const wrong = (name: (typeof FILTERS)[number]) => fieldError(list.error, name);
  const apply = (e: Event) => { e.preventDefault(); setHashParams('jobs', Object.fromEntries(Object.entries(form).map(([k, v]) => [k, v.trim()]))); };
  return (
    <>
      <h1>Jobs</h1>
      <section class="card">
        <form class="filters" onSubmit={apply} aria-label="Filter jobs">
          <Field label="Status" error={wrong('status')}>{(id, describedBy) => (
            <select id={id} value={form.status} aria-describedby={describedBy} onChange={set('status')}>
              <option value="">Any</option>
              {Object.entries(JOB_STATUS_TEXT).map(([value, text]) => <option value={value}>{text}</option>)}
              <option value="failed">Failed (gave up)</option>
            </select>
          )}</Field>
          <Field label="Event type" error={wrong('event_type')}>{(id, describedBy) => <input id={id} value={form.event_type} aria-describedby={describedBy} onInput={set('event_type')} placeholder="invoice.paid" />}</Field>
          <Field label="Application id" error={wrong('application_id')}>{(id, describedBy) => <input id={id} value={form.application_id} aria-describedby={describedBy} onInput={set('application_id')} placeholder="app_…" />}</Field>
          <Field label="Endpoint id" error={wrong('endpoint_id')}>{(id, describedBy) => <input id={id} value={form.endpoint_id} aria-describedby={describedBy} onInput={set('endpoint_id')} placeholder="ep_…" />}</Field>
          <Field label="Created after" error={wrong('created_after')}>{(id, describedBy) => <input id={id} value={form.created_after} aria-describedby={describedBy} onInput={set('created_after')} placeholder="2026-11-22T00:00:00Z" />}</Field>
          <Field label="Created before" error={wrong('created_before')}>{(id, describedBy) => <input id={id} value={form.created_before} aria-describedby={describedBy} onInput={set('created_before')} placeholder="ISO 8601" />}</Field>
          <div class="filter-buttons">
            <button type="submit" class="primary">Filter</button>
            <button type="button" onClick={() => { setForm(Object.fromEntries(FILTERS.map((f) => [f, ''])) as typeof form); setHashParams('jobs', {}); }}>Clear</button>
          </div>
        </form>
        <Loaded state={list}>{(l) => l && (l.data.length === 0 ? <p class="empty">No jobs match.</p> : (
          <>
            <p class="muted">{l.pagination.total} job{l.pagination.total === 1 ? '' : 's'}</p>
            <JobTable jobs={l} />
            <Pager page={l.pagination.page} totalPages={l.pagination.total_pages} onPage={(p) => setHashParams('jobs', { ...current, page: p })} label="Job pages" />
          </>
        ))}</Loaded>
      </section>
    </>
  );
}

/** How often a job on its way is read again. */
const JOB_REFRESH_MS = 3_000;

export function JobDetailPage(props: { id: string }) {
  const { client } = useSession();
  const job = useLoad(() => client<Job>('GET', `/v1/webhook-jobs/${props.id}`), [props.id]);
  // A job on its way (created, sending, awaiting a retry) is read again every few seconds: after a
  // retry the page said "Sending", with Cancel disabled, until reloaded by hand.
  const moving = job.data !== undefined && ['created', 'executing', 'awaiting_retry'].includes(job.data.status);
  useWhileShown(JOB_REFRESH_MS, job.reload, moving);
  const [flash, setFlash] = useState('');
  // What a retry sends (decisions §7): every target that has not succeeded, or all of them when
  // all had; the page said "every failed target" of a succeeded job too (a probe).
  const retry = useAction(async () => {
    const before = job.data?.status;
    await client('POST', `/v1/webhook-jobs/${props.id}/retry`);
    setFlash(before === 'succeeded' ? 'Retry queued: every target is sent the job again, since all had succeeded.'
      : 'Retry queued: every target that has not succeeded is tried again (all of them if all had).');
    job.reload();
  });
  const cancel = useAction(async () => {
    if (!window.confirm('Cancel this job? No further attempt will start.')) return;
    await client('POST', `/v1/webhook-jobs/${props.id}/cancel`); setFlash('Job cancelled.'); job.reload();
  });
  return (
    <>
      <p class="back"><a href="#/jobs">← Jobs</a></p>
      <Loaded state={job}>{(j) => (
        <>
          <div class="page-head">
            <h1>Job <code>{j.id}</code></h1>
            <div class="actions">
              <Action need="webhooks:write" busy={retry.busy} disabled={!['succeeded', 'discarded', 'awaiting_retry', 'archived'].includes(j.status)} onClick={() => void retry.run()}>Retry</Action>
              <Action need="webhooks:write" kind="danger" busy={cancel.busy} disabled={!['created', 'awaiting_retry'].includes(j.status)} onClick={() => void cancel.run()}>Cancel</Action>
            </div>
          </div>
          {flash && <Notice kind="success">{flash}</Notice>}
          <ErrorNotice error={retry.error ?? cancel.error} />
          <section class="card">
            <dl class="facts">
              <dt>Status</dt><dd><JobStatus status={j.status} /></dd>
              <dt>Event type</dt><dd><code>{j.event_type}</code></dd>
              <dt>Application</dt><dd><a href={`#/applications/${j.application_id}`}><code>{j.application_id}</code></a></dd>
              <dt>Event id</dt><dd>{j.event_id ?? '—'}</dd>
              <dt>Attempts</dt><dd>{j.attempt_count} (up to {j.max_retries + 1} per endpoint)</dd>
              <dt>Created</dt><dd>{formatTime(j.created_at)}</dd>
              <dt>Delivery window ends</dt><dd>{formatTime(j.expires_at)}</dd>
              <dt>Completed</dt><dd>{formatTime(j.completed_at)}</dd>
            </dl>
            <h2 class="sub">Payload</h2>
            <pre tabIndex={0} aria-label="Payload">{JSON.stringify(j.payload, null, 2)}</pre>
          </section>
          <section class="card" aria-labelledby="attempts">
            <h2 id="attempts">Attempts ({j.deliveries.length})</h2>
            {j.deliveries.length === 0 ? <p class="empty">No attempt yet.</p> : (
              <table class="list attempts-table">
                <thead><tr><th scope="col">Endpoint</th><th scope="col">#</th><th scope="col">Result</th><th scope="col">HTTP</th><th scope="col">Latency</th><th scope="col">When</th><th scope="col">Response body</th></tr></thead>
                <tbody>{j.deliveries.map((d) => (
                  <tr key={`${d.endpoint_id}-${d.attempted_at}-${d.attempt}`}>
                    <td><a href={`#/endpoints/${d.endpoint_id}`}><code>{d.endpoint_id}</code></a></td>
                    <td>{d.attempt}</td>
                    <td class={d.success ? 'ok' : 'failed'}>{d.success ? 'Succeeded' : `Failed${d.error && d.error !== 'http_status' ? ` (${d.error.replace('_', ' ')})` : ''}`}</td>
                    <td>{d.status_code ?? '—'}</td><td class="nowrap">{d.latency_ms} ms</td><td><When iso={d.attempted_at} /></td>
                    <td><pre class="body" tabIndex={0} aria-label="Response body">{d.response_body || '(empty)'}</pre></td>
                  </tr>
                ))}</tbody>
              </table>
            )}
          </section>
        </>
      )}</Loaded>
    </>
  );
}
