// Applications: search and page through them, create one; an application's detail with its
// endpoints (and the deleted ones that can be restored), its latest jobs, and a portal link.
import { useState } from 'preact/hooks';
import { query, type ApplicationDetail, type ApplicationList, type DeletedEndpointList, type JobList, type Need, type PortalLink } from './api.ts';
import { Action, Copyable, hashParams, JobStatus, Loaded, NeedsScope, Rate, setHashParams, useLoad, useRouteDraft, useSession } from './session.tsx';
import { ErrorNotice, Field, fieldError, formatTime, Notice, Pager, shownUrl, StatusBadge, TypeName, useAction, When } from '../shared/ui.tsx';

export function ApplicationsPage() {
  const { client, can } = useSession();
  const params = hashParams();
  const search = params.get('search') ?? '';
  const page = Number(params.get('page') ?? 1) || 1;
  const [text, setText] = useRouteDraft(search);
  const list = useLoad(() => can('applications:read')
    ? client<ApplicationList>('GET', `/v1/applications${query({ search, page, per_page: 20 })}`) : Promise.resolve(null), [search, page]);
  const [flash, setFlash] = useState('');
  if (!can('applications:read')) return <><h1>Applications</h1><NeedsScope need="applications:read" what="applications" /></>;
  return (
    <>
      <h1>Applications</h1>
      {flash && <Notice kind="success">{flash}</Notice>}
      <section class="card">
        <form class="inline" role="search" onSubmit={(e) => { e.preventDefault(); setHashParams('applications', { search: text.trim() }); }}>
          <Field label="Search by name or uid">{(id) => <input id={id} type="search" value={text} onInput={(e) => setText((e.target as HTMLInputElement).value)} />}</Field>
          <button type="submit">Search</button>
        </form>
        <Loaded state={list}>{(l) => l && (l.data.length === 0 ? <p class="empty">{search ? `No application matches “${search}”.` : 'No applications yet.'}</p> : (
          <>
            <table class="list">
              <caption class="visually-hidden">Applications</caption>
              <thead><tr><th scope="col">Name</th><th scope="col">uid</th><th scope="col">Endpoints</th><th scope="col">Jobs</th><th scope="col">Success rate (24 h)</th><th scope="col">Created</th></tr></thead>
              <tbody>{l.data.map((a) => (
                <tr key={a.id}>
                  <td class="name"><a href={`#/applications/${a.id}`}>{a.name}</a></td>
                  <td><code class="nobreak">{a.uid ?? '—'}</code></td>
                  <td>{a.endpoints_count}</td><td>{a.webhook_jobs_count}</td><td><Rate value={a.success_rate} /></td>
                  <td><When iso={a.created_at} /></td>
                </tr>
              ))}</tbody>
            </table>
            <Pager page={l.pagination.page} totalPages={l.pagination.total_pages} onPage={(p) => setHashParams('applications', { search, page: p })} label="Application pages" />
          </>
        ))}</Loaded>
      </section>
      <NewApplication onCreated={(name) => { setFlash(`Application “${name}” created.`); list.reload(); }} />
    </>
  );
}

function NewApplication(props: { onCreated: (name: string) => void }) {
  const { client } = useSession();
  const [name, setName] = useState('');
  const [uid, setUid] = useState('');
  const create = useAction(async () => {
    await client('POST', '/v1/applications', { name, uid: uid.trim() || null });
    props.onCreated(name); setName(''); setUid('');
  });
  return (
    <section class="card" aria-labelledby="new-app">
      <h2 id="new-app">New application</h2>
      <form class="inline" onSubmit={(e) => { e.preventDefault(); void create.run(); }}>
        <Field label="Name" error={fieldError(create.error, 'name')}>{(id, d) => <input id={id} value={name} aria-describedby={d} onInput={(e) => setName((e.target as HTMLInputElement).value)} />}</Field>
        <Field label="uid (optional)" error={fieldError(create.error, 'uid')}>{(id, d) => <input id={id} value={uid} aria-describedby={d} onInput={(e) => setUid((e.target as HTMLInputElement).value)} />}</Field>
        <Action need="applications:write" type="submit" kind="primary" busy={create.busy}>Create application</Action>
      </form>
      {create.error && !fieldError(create.error, 'name') && !fieldError(create.error, 'uid') && <ErrorNotice error={create.error} />}
    </section>
  );
}

export function ApplicationDetailPage(props: { id: string }) {
  const { client, can } = useSession();
  const app = useLoad(() => client<ApplicationDetail>('GET', `/v1/applications/${props.id}`), [props.id]);
  const jobs = useLoad(() => can('webhooks:read') ? client<JobList>('GET', `/v1/webhook-jobs?application_id=${props.id}&per_page=10`) : Promise.resolve(null), [props.id]);
  const [deletedPage, setDeletedPage] = useState(1);
  const deleted = useLoad(() => can('endpoints:read')
    ? client<DeletedEndpointList>('GET', `/v1/endpoints?application_id=${props.id}&deleted=true&per_page=20&page=${deletedPage}`) : Promise.resolve(null), [props.id, deletedPage]);
  // An endpoint deleted from its own page lands here with `?deleted=ep_…`: said once (the query
  // is taken out of the address without a navigation, so a reload does not say it again).
  const [flash, setFlash] = useState(() => {
    if (!hashParams().get('deleted')) return '';
    history.replaceState(null, '', `#/applications/${props.id}`);
    return 'Endpoint deleted. It can be restored below for 30 days.';
  });
  const restore = useAction(async (id: string) => {
    await client('POST', `/v1/endpoints/${id}/restore`);
    setFlash('Endpoint restored.'); app.reload(); deleted.reload();
  });
  return (
    <>
      <p class="back"><a href="#/applications">← Applications</a></p>
      <Loaded state={app}>{(a) => (
        <>
          <h1>{a.name}</h1>
          <p class="meta"><code>{a.id}</code>{a.uid && <span>uid <code>{a.uid}</code></span>}<span>created {formatTime(a.created_at)}</span>
            <span>success rate <Rate value={a.success_rate} /></span></p>
          {flash && <Notice kind="success">{flash}</Notice>}
          <PortalLinkCard applicationId={a.id} />
          <section class="card" aria-labelledby="app-endpoints">
            <h2 id="app-endpoints">Endpoints</h2>
            {a.endpoints.length === 0 ? <p class="empty">No endpoints.</p> : (
              <table class="list">
                <thead><tr><th scope="col">URL</th><th scope="col">Status</th><th scope="col">Success rate (24 h)</th></tr></thead>
                <tbody>{a.endpoints.map((e) => (
                  <tr key={e.id}><td class="url"><a href={`#/endpoints/${e.id}`}>{shownUrl(e.url)}</a></td><td><StatusBadge status={e.status} /></td><td><Rate value={e.success_rate} /></td></tr>
                ))}</tbody>
              </table>
            )}
            <Loaded state={deleted}>{(d) => d && d.data.length > 0 && (
              <>
                <h3>Deleted endpoints (restorable for 30 days)</h3>
                <ul class="deleted">{d.data.map((e) => (
                  <li key={e.id}><span class="url">{shownUrl(e.url)}</span><span class="muted">deleted {formatTime(e.deleted_at)}</span>
                    <Action need="endpoints:write" busy={restore.busy} onClick={() => void restore.run(e.id)} label={`Restore ${shownUrl(e.url)}`}>Restore</Action></li>
                ))}</ul>
                <Pager page={d.pagination.page} totalPages={d.pagination.total_pages} onPage={setDeletedPage} label="Deleted endpoint pages" />
                <ErrorNotice error={restore.error} />
              </>
            )}</Loaded>
          </section>
          <section class="card" aria-labelledby="app-jobs">
            <h2 id="app-jobs">Latest jobs</h2>
            {!can('webhooks:read') ? <NeedsScope need="webhooks:read" what="jobs" /> : (
              <Loaded state={jobs}>{(j) => j && (j.data.length === 0 ? <p class="empty">No jobs yet.</p> : (
                <>
                  <JobTable jobs={j} />
                  <p><a href={`#/jobs?application_id=${a.id}`}>{j.pagination.total === 1 ? 'The one job of this application' : `All ${j.pagination.total} jobs of this application`}</a></p>
                </>
              ))}</Loaded>
            )}
          </section>
        </>
      )}</Loaded>
    </>
  );
}

export function JobTable(props: { jobs: JobList }) {
  return (
    <table class="list">
      <thead><tr><th scope="col">Job</th><th scope="col">Event type</th><th scope="col">Status</th><th scope="col">Created</th></tr></thead>
      <tbody>{props.jobs.data.map((j) => (
        <tr key={j.id}><td><a href={`#/jobs/${j.id}`}><code class="nobreak">{j.id}</code></a></td><td><TypeName name={j.event_type} /></td><td><JobStatus status={j.status} /></td><td><When iso={j.created_at} /></td></tr>
      ))}</tbody>
    </table>
  );
}

/** What a portal link's customer does with it: its token does no more than the key that made it. */
const PORTAL_NEEDS: readonly Need[] = ['endpoints:write', 'webhooks:write', 'event-types:read'];

function PortalLinkCard(props: { applicationId: string }) {
  const { client, can } = useSession();
  const lacks = PORTAL_NEEDS.filter((need) => !can(need));
  const [readOnly, setReadOnly] = useState(false);
  const [hours, setHours] = useState('1');
  const [link, setLink] = useState<PortalLink | null>(null);
  const create = useAction(async () => {
    setLink(await client<PortalLink>('POST', `/v1/applications/${props.applicationId}/portal-links`, { expires_in: Number(hours) * 3600, read_only: readOnly }));
  });
  return (
    <section class="card" aria-labelledby="portal-link">
      <h2 id="portal-link">Portal link</h2>
      <p class="muted">A link to this application's consumer portal, for its customer: they manage their own endpoints with it.</p>
      <div class="inline">
        <Field label="Valid for">{(id) => (
          <select id={id} value={hours} onChange={(e) => setHours((e.target as HTMLSelectElement).value)}>
            <option value="1">1 hour</option><option value="24">1 day</option><option value="168">7 days</option>
          </select>
        )}</Field>
        <label class="check"><input type="checkbox" checked={readOnly} onChange={(e) => setReadOnly((e.target as HTMLInputElement).checked)} /> Read-only</label>
        <Action need="applications:write" kind="primary" busy={create.busy} onClick={() => void create.run()}>Generate portal link</Action>
      </div>
      {can('applications:write') && lacks.length > 0 && (
        <p class="notice notice-info">A link does no more than the key that makes it: with this key its customer cannot use
          what needs {lacks.map((need, i) => <span key={need}>{i > 0 ? ', ' : ''}<code>{need}</code></span>)} (a read-only link needs the read scopes only).</p>
      )}
      <ErrorNotice error={create.error} />
      {link && (
        <div class="created">
          <p>Portal link{link.read_only ? ' (read-only)' : ''}, valid until {formatTime(link.expires_at)}. It is shown once.</p>
          <Copyable value={link.url} label="Portal link URL" />
          {/* Opened on this origin (the service serving this page also serves the portal), whatever PUBLIC_URL says. */}
          <p><a href={`/portal#${link.token}`} target="_blank" rel="noopener noreferrer">Open the portal</a></p>
        </div>
      )}
    </section>
  );
}
