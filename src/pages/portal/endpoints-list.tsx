// The application's endpoints with status and 24-hour success rate, and the deleted ones that
// can still be restored: each list a page at a time, with a pager when it has more than one.
import { useEffect, useState } from 'preact/hooks';
import type { Application, Client, DeletedEndpointList, Endpoint, EndpointList } from './api.ts';
import { ActionButton, Busy, ErrorNotice, Names, Pager, shownUrl, StatusBadge, formatRate, formatTime, useAction } from '../shared/ui.tsx';

const PER_PAGE = 25;

/** Which page of each list is shown: kept by the shell, so that "← All endpoints" (or a delete) returns to the page the endpoint was opened from. */
export type ListPages = { page: number; deletedPage: number };

type Props = {
  client: Client; applicationId: string; readApplication: () => Promise<Application>; readOnly: boolean; onOpen: (id: string) => void; onAdd: () => void; onRestored: (id: string) => void;
  pages: ListPages; onPages: (pages: ListPages) => void;
};

export function EndpointsList(props: Props) {
  const { client, applicationId } = props;
  const [list, setList] = useState<EndpointList | null>(null);
  const [rates, setRates] = useState<Map<string, number>>(new Map());
  const [error, setError] = useState<unknown>(null);
  const { page, deletedPage } = props.pages;
  const setPage = (next: number) => props.onPages({ ...props.pages, page: next });
  const setDeletedPage = (next: number) => props.onPages({ ...props.pages, deletedPage: next });
  const [deleted, setDeleted] = useState<DeletedEndpointList | null>(null);
  const [deletedError, setDeletedError] = useState<unknown>(null);
  useEffect(() => {
    // The list items carry no success rate; the application's own view has it for each endpoint.
    Promise.all([
      client<EndpointList>('GET', `/v1/endpoints?application_id=${applicationId}&per_page=${PER_PAGE}&page=${page}`),
      props.readApplication(),
    ]).then(([endpoints, application]) => {
      // The page kept from before is past the end (its last endpoint deleted): the last page.
      const last = Math.max(1, endpoints.pagination.total_pages);
      if (page > last) { setPage(last); return; }
      setRates(new Map(application.endpoints.map((e) => [e.id, e.success_rate])));
      setList(endpoints);
    }, setError);
  }, [applicationId, page]);
  useEffect(() => {
    client<DeletedEndpointList>('GET', `/v1/endpoints?application_id=${applicationId}&deleted=true&per_page=${PER_PAGE}&page=${deletedPage}`)
      .then((found) => {
        const last = Math.max(1, found.pagination.total_pages);
        if (deletedPage > last) setDeletedPage(last); else setDeleted(found);
      }, setDeletedError);
  }, [applicationId, deletedPage]);
  const restore = useAction(async (id: string) => {
    const restored = await client<Endpoint>('POST', `/v1/endpoints/${id}/restore`);
    props.onRestored(restored.id);
  });

  return (
    <>
      <section class="card" aria-labelledby="list-title">
        <div class="card-head">
          <div>
            <h1 id="list-title">Endpoints</h1>
            <p class="hint">The URLs that receive your webhooks.</p>
          </div>
          {!props.readOnly && <button type="button" class="primary" onClick={props.onAdd}>Add endpoint</button>}
        </div>
        {error ? <ErrorNotice error={error} /> : !list ? <Busy label="Loading endpoints…" /> : list.data.length === 0 ? (
          <div class="empty">
            <p><strong>No endpoints yet.</strong></p>
            <p>{props.readOnly ? 'Nothing receives webhooks yet.' : 'Add the URL of your server to start receiving webhooks.'}</p>
          </div>
        ) : (
          <table class="endpoints">
            <thead><tr><th scope="col">URL</th><th scope="col">Status</th><th scope="col">Success (24 h)</th><th scope="col">Event types</th></tr></thead>
            <tbody>
              {list.data.map((endpoint) => (
                <tr key={endpoint.id}>
                  <td class="url"><a href="#" onClick={(event) => { event.preventDefault(); props.onOpen(endpoint.id); }}>{shownUrl(endpoint.url)}</a></td>
                  <td><StatusBadge status={endpoint.status} /></td>
                  <td data-label="Success (24 h)" class={(rates.get(endpoint.id) ?? 100) < 90 ? 'rate low' : 'rate'}>{rates.has(endpoint.id) ? formatRate(rates.get(endpoint.id)!) : '—'}</td>
                  <td data-label="Event types" class="types"><Names names={endpoint.event_types} /></td>
                </tr>
              ))}
            </tbody>
          </table>
        )}
        {list && <Pager page={list.pagination.page} totalPages={list.pagination.total_pages} onPage={setPage} label="Endpoint pages" />}
      </section>
      <section class="card" aria-labelledby="deleted-title">
        <h2 id="deleted-title">Deleted endpoints</h2>
        {deletedError ? <ErrorNotice error={deletedError} /> : !deleted ? <Busy /> : deleted.data.length === 0 ? (
          <p class="empty">No deleted endpoints. Deleted endpoints can be restored for 30 days.</p>
        ) : (
          <ul class="deleted">
            {deleted.data.map((endpoint) => (
              <li key={endpoint.id}>
                <span class="url">{shownUrl(endpoint.url)}</span>
                <span class="muted">deleted {formatTime(endpoint.deleted_at)}</span>
                {!props.readOnly && <ActionButton busy={restore.busy} onClick={() => void restore.run(endpoint.id)}>Restore<span class="visually-hidden"> {shownUrl(endpoint.url)}</span></ActionButton>}
              </li>
            ))}
          </ul>
        )}
        {deleted && <Pager page={deleted.pagination.page} totalPages={deleted.pagination.total_pages} onPage={setDeletedPage} label="Deleted endpoint pages" />}
        <ErrorNotice error={restore.error} />
      </section>
    </>
  );
}
