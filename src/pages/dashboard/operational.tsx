// Operational webhooks: where this organization is told about its own endpoints (disabled,
// failing, deliveries given up…): its operational endpoints (add, pause/resume, delete) and the
// recent operational events with the state of each delivery.
import { useState } from 'preact/hooks';
import { allPages, query, type OperationalEndpoint, type OperationalEventList } from './api.ts';
import { Action, Loaded, NeedsScope, useLoad, useSession } from './session.tsx';
import { CursorPager, ErrorNotice, Field, fieldError, Names, Notice, shownUrl, StatusBadge, useAction, useCursorPages, When } from '../shared/ui.tsx';

const TYPES = ['endpoint.created', 'endpoint.updated', 'endpoint.deleted', 'endpoint.restored', 'endpoint.disabled',
  'endpoint.enabled', 'endpoint.failing', 'delivery.exhausted'];

export function OperationalPage() {
  const { client, can } = useSession();
  // Every operational endpoint (MAX_OPERATIONAL_ENDPOINTS bounds them): the events below name
  // their endpoints by id, and one missing here would read as deleted.
  const endpoints = useLoad(() => can('endpoints:read')
    ? allPages<OperationalEndpoint>(client, '/v1/operational-webhooks/endpoints', { limit: 100 }).then((data) => ({ data })) : Promise.resolve(null), []);
  const eventPages = useCursorPages();
  const eventCursor = eventPages.cursor;
  const events = useLoad(() => can('endpoints:read')
    ? client<OperationalEventList>('GET', `/v1/operational-webhooks/events${query({ limit: 25, cursor: eventCursor })}`)
    : Promise.resolve(null), [eventCursor]);
  const [flash, setFlash] = useState('');
  const act = useAction(async (id: string, what: 'pause' | 'resume' | 'delete') => {
    if (what === 'delete') {
      if (!window.confirm('Delete this operational endpoint? Its undelivered events are dropped.')) return;
      await client('DELETE', `/v1/operational-webhooks/endpoints/${id}`);
    } else {
      await client('PATCH', `/v1/operational-webhooks/endpoints/${id}`, { status: what === 'pause' ? 'paused' : 'active' });
    }
    setFlash(what === 'delete' ? 'Operational endpoint deleted.' : what === 'pause' ? 'Operational endpoint paused.' : 'Operational endpoint resumed.');
    endpoints.reload();
  });
  if (!can('endpoints:read')) return <><h1>Operational webhooks</h1><NeedsScope need="endpoints:read" what="operational webhooks" /></>;
  const urlOf = new Map((endpoints.data?.data ?? []).map((e) => [e.id, shownUrl(e.url)]));
  return (
    <>
      <h1>Operational webhooks</h1>
      <p class="muted lead">Events about your own delivery setup (an endpoint disabled or failing, a delivery given up), sent to URLs of yours, signed like every webhook.</p>
      {flash && <Notice kind="success">{flash}</Notice>}
      <ErrorNotice error={act.error} />
      <section class="card" aria-labelledby="op-endpoints">
        <h2 id="op-endpoints">Operational endpoints</h2>
        <Loaded state={endpoints}>{(l) => l && (l.data.length === 0 ? <p class="empty">No operational endpoint: no events are recorded until you add one.</p> : (
          <table class="list">
            <thead><tr><th scope="col">URL</th><th scope="col">Events</th><th scope="col">Status</th><th scope="col">Created</th><th scope="col"><span class="visually-hidden">Actions</span></th></tr></thead>
            <tbody>{l.data.map((e) => (
              <tr key={e.id}>
                <td class="url">{shownUrl(e.url)}</td><td class="types"><Names names={e.event_types} empty="all" /></td>
                <td><StatusBadge status={e.status} /></td><td><When iso={e.created_at} /></td>
                <td><div class="actions">
                  {e.status === 'active'
                    ? <Action need="endpoints:write" busy={act.busy} label={`Pause ${shownUrl(e.url)}`} onClick={() => void act.run(e.id, 'pause')}>Pause</Action>
                    : <Action need="endpoints:write" busy={act.busy} label={`Resume ${shownUrl(e.url)}`} onClick={() => void act.run(e.id, 'resume')}>Resume</Action>}
                  <Action need="endpoints:write" kind="danger" busy={act.busy} label={`Delete ${shownUrl(e.url)}`} onClick={() => void act.run(e.id, 'delete')}>Delete</Action>
                </div></td>
              </tr>
            ))}</tbody>
          </table>
        ))}</Loaded>
        <NewOperationalEndpoint onCreated={() => { setFlash('Operational endpoint added.'); endpoints.reload(); events.reload(); }} />
      </section>
      <section class="card" aria-labelledby="op-events">
        <div class="card-head"><h2 id="op-events">Recent events</h2><button type="button" onClick={() => events.reload()}>Refresh</button></div>
        <Loaded state={events}>{(l) => l && (l.data.length === 0 ? <p class="empty">No operational events yet.</p> : (
          <table class="list">
            <thead><tr><th scope="col">When</th><th scope="col">Event</th><th scope="col">About</th><th scope="col">Deliveries</th></tr></thead>
            <tbody>{l.data.map((v) => {
              const about = (v.data['endpoint_id'] ?? v.data['id']) as string | undefined;
              return (
                <tr key={v.id}>
                  <td><When iso={v.created_at} /></td><td><code>{v.type}</code>{typeof v.data['reason'] === 'string' && <span class="muted"> ({v.data['reason'] as string})</span>}</td>
                  <td>{about ? <a href={`#/endpoints/${about}`}><code>{about}</code></a> : '—'}
                    {typeof v.data['job_id'] === 'string' && <> · job <a href={`#/jobs/${v.data['job_id'] as string}`}><code>{v.data['job_id'] as string}</code></a></>}</td>
                  <td>{v.deliveries.map((d) => (
                    <span key={d.endpoint_id} class="delivery">{d.status.replace('_', ' ')}{d.attempt_count > 0 && ` after ${d.attempt_count} attempt${d.attempt_count === 1 ? '' : 's'}`}
                      {/* Named unless there is one operational endpoint: an event that went to one of two was not (a probe). */}
                      {urlOf.size !== 1 || !urlOf.has(d.endpoint_id) ? <span class="muted"> → {urlOf.get(d.endpoint_id) ?? 'a deleted endpoint'}</span> : null}</span>
                  ))}</td>
                </tr>
              );
            })}</tbody>
          </table>
        ))}</Loaded>
        <CursorPager pages={eventPages} next={events.data?.next_cursor} label="Event pages" />
      </section>
    </>
  );
}

function NewOperationalEndpoint(props: { onCreated: () => void }) {
  const { client } = useSession();
  const [url, setUrl] = useState('');
  const [types, setTypes] = useState<string[]>([]);
  const create = useAction(async () => {
    await client('POST', '/v1/operational-webhooks/endpoints', { url, event_types: types });
    setUrl(''); setTypes([]); props.onCreated();
  });
  return (
    <form class="sub-form" onSubmit={(e) => { e.preventDefault(); void create.run(); }} aria-labelledby="op-new">
      <h3 id="op-new">Add an operational endpoint</h3>
      <Field label="URL" error={fieldError(create.error, 'url')}>{(id, d) => <input id={id} type="url" value={url} aria-describedby={d} onInput={(e) => setUrl((e.target as HTMLInputElement).value)} placeholder="https://ops.example.com/hookline" />}</Field>
      <fieldset class="field">
        <legend>Events (none checked: all)</legend>
        <div class="check-grid">{TYPES.map((t) => (
          <label key={t} class="check"><input type="checkbox" checked={types.includes(t)}
            onChange={(e) => setTypes((e.target as HTMLInputElement).checked ? [...types, t] : types.filter((x) => x !== t))} /> <code>{t}</code></label>
        ))}</div>
      </fieldset>
      {create.error && !fieldError(create.error, 'url') && <ErrorNotice error={create.error} />}
      <Action need="endpoints:write" type="submit" kind="primary" busy={create.busy}>Add operational endpoint</Action>
    </form>
  );
}
