// The portal's shell: reads the portal link's token from the URL fragment (then removes it from
// the address bar and keeps it in memory only), asks the API what the token is (GET
// /v1/credential: its application and whether it is read-only), shows the endpoints list, an
// endpoint, or the form to add one, and reads the application and its event types beside them.
import { useEffect, useMemo, useRef, useState } from 'preact/hooks';
import { allPages, ApiError, LACKS_SCOPE, makeClient, type Application, type Client, type Credential, type EventType } from './api.ts';
import { EndpointDetail } from './endpoint-detail.tsx';
import { EndpointForm } from './endpoint-form.tsx';
import { EndpointsList, type ListPages } from './endpoints-list.tsx';
import { Busy, ErrorNotice, Notice, formatTime, useFocusOnChange, useWhileShown } from '../shared/ui.tsx';

type View = { kind: 'list' } | { kind: 'new' } | { kind: 'endpoint'; id: string; editing?: boolean };
/**
 * What a history entry of the portal holds: its view, and the view of the entry below it (the
 * one Back returns to), so that leaving a view for the one it was opened from goes Back instead
 * of adding an entry. The address stays the same for every view: no token, no id.
 */
type Entry = { portal: View; below?: View };
const here = () => window.location.pathname + window.location.search;
const entryOf = (state: unknown): Entry | null =>
  state && typeof state === 'object' && 'portal' in state ? state as Entry : null;

/** `#<token>` as a portal link's `url` carries it; read once, then gone from the URL. */
function takeToken(): string {
  const token = decodeURIComponent(window.location.hash.replace(/^#/, '').split('&')[0] ?? '');
  if (window.location.hash) history.replaceState({ portal: { kind: 'list' } } satisfies Entry, '', here());
  return token;
}

const token = takeToken();

// Another link opened over this one (an embedding page setting its iframe's src to a fresh link,
// a customer pasting one): only the fragment changed, so the browser kept this page, which went
// on showing the first link's application. The page starts again with the new one.
window.addEventListener('hashchange', () => {
  if (window.location.hash.length > 1) window.location.reload();
});

/** How often an open page asks whether its link still works. */
const LINK_CHECK_MS = 5_000;

export function App() {
  /** Why the link stopped working (the API's 401 message), at the start or during the visit. */
  const [ended, setEnded] = useState<ApiError | null>(null);
  const [lacking, setLacking] = useState<string[] | null>(null);
  const [error, setError] = useState<unknown>(null);
  // A read refused for a scope the link's key lacks, by the shell or by a view (the list's
  // endpoints, when the shell's own reads need no other scope): every scope the portal reads with
  // is asked once, so that the page names them all.
  const client: Client = useMemo(() => {
    let asked = false;
    const made: Client = makeClient(token, setEnded, (caught) => {
      if (asked) return;
      asked = true;
      scopesLacking(made, caught).then(setLacking, setError);
    });
    return made;
  }, []);
  const [credential, setCredential] = useState<Credential | null>(null);
  /** For the header's name; null until read, which the views do not wait for. */
  const [application, setApplication] = useState<Application | null>(null);
  /** Every event type, for the endpoint form; null until read. */
  const [eventTypes, setEventTypes] = useState<EventType[] | null>(null);
  /**
   * The shell's read of the application, handed to the first view that reads it (the list, for
   * its success rates): the answer carries every endpoint (232 KB at 2,000 endpoints)
   * and the shell and the list each asked for it. Dropped when the view changes, so a view opened
   * later reads rates of its own time.
   */
  const firstRead = useRef<Promise<Application> | null>(null);
  const [notPortal, setNotPortal] = useState(false);
  const [view, setView] = useState<View>(() => entryOf(history.state)?.portal ?? { kind: 'list' });
  const [flash, setFlash] = useState('');
  /** The list's pages, kept while an endpoint is open: "← All endpoints" from page 2 showed page 1. */
  const [listPages, setListPages] = useState<ListPages>({ page: 1, deletedPage: 1 });
  /** What to say once the Back that `leaveTo` started has arrived. */
  const [pending] = useState({ message: '' });

  useEffect(() => {
    if (!token) return;
    (async () => {
      const credential = await client<Credential>('GET', '/v1/credential');
      if (credential.type !== 'portal_token' || !credential.application_id) { setNotPortal(true); return; }
      // The view is shown at once, with the application and the event types read beside it: the
      // first render of a tenant with 1,501 event types waited for their 16 pages, one after
      // another, and for the application, before it asked for the endpoints (2.1 s in a probe).
      const application = firstRead.current = client<Application>('GET', `/v1/applications/${credential.application_id}`);
      setCredential(credential);
      // The event types are for the endpoint form only: a read-only link never opens it, and
      // read all 16 pages of a big tenant's for nothing (a probe).
      await Promise.all([
        application.then(setApplication),
        credential.read_only ? null : allPages<EventType>(client, '/v1/event-types', { limit: 100 }).then(setEventTypes),
      ]);
    })().catch((caught) => {
      if (!(caught instanceof ApiError && caught.status === 403 && LACKS_SCOPE.test(caught.message))) setError(caught);
    });
  }, []);

  // Whether the link still works, asked every few seconds on every view (the endpoint view also
  // reads its endpoint that often): a revoked or expired link ends the page where the customer
  // is, not at their next action. The client turns the API's 401 into `ended`.
  useWhileShown(LINK_CHECK_MS, () => void client<Credential>('GET', '/v1/credential').catch(() => {}), credential !== null && !ended);

  const [moved, setMoved] = useState(0);
  useFocusOnChange(moved);

  const applicationId = credential?.application_id;
  const readOnly = credential?.read_only ?? true;
  /** The application with its endpoints' success rates: the shell's read if no view took it yet, else a new one. */
  const readApplication = (): Promise<Application> => {
    const kept = firstRead.current;
    firstRead.current = null;
    return kept ?? client<Application>('GET', `/v1/applications/${applicationId}`);
  };
  const show = (next: View, message: string) => { firstRead.current = null; setFlash(message); setView(next); setMoved((n) => n + 1); window.scrollTo(0, 0); };
  // Each view is a history entry, so the browser's Back and Forward move between the portal's
  // views (Back left the portal, and with it the token, which lives in this page's memory only).
  const go = (next: View, message = '', replace = false) => {
    const entry: Entry = replace ? { ...(entryOf(history.state) ?? {}), portal: next } : { portal: next, below: view };
    if (replace) history.replaceState(entry, '', here()); else history.pushState(entry, '', here());
    show(next, message);
  };
  /** Leaves this view for `next`: Back when `next` is the entry below (whence this view was opened), else in this entry's place. */
  const leaveTo = (next: View, message = '') => {
    const below = entryOf(history.state)?.below;
    if (below && JSON.stringify(below) === JSON.stringify(next)) { pending.message = message; history.back(); } else go(next, message, true);
  };
  useEffect(() => {
    const onPop = (event: PopStateEvent) => {
      const entry = entryOf(event.state);
      if (!entry) return; // not an entry of the portal's (a link's fragment: the hashchange above)
      show(entry.portal, pending.message);
      pending.message = '';
    };
    window.addEventListener('popstate', onPop);
    return () => window.removeEventListener('popstate', onPop);
  }, []);
  let body;
  if (!token || (ended && /malformed|Authorization header/i.test(ended.message))) {
    // No token, or one the API cannot even read (a link copied in part, or with a space in it: the
    // API's own words about the Authorization header meant nothing to a customer): the same advice.
    body = <Message title="This link is incomplete or invalid">Open the portal with the full link you were given. Links look like <code>…/portal#pt_…</code>.</Message>;
  } else if (ended) {
    body = <Message title={endedTitle(ended)}>{ended.message} Ask the service that sent you here for a new link.</Message>;
  } else if (notPortal) {
    body = <Message title="This is not a portal link">The portal opens with a portal link, made for one application. Ask the service that sent you here for one.</Message>;
  } else if (lacking) {
    body = (
      <Message title="This link cannot show your webhooks">
        The API key that made this link lacks the {lacking.map((scope, i) => <span key={scope}>{i > 0 ? (i === lacking.length - 1 ? ' and ' : ', ') : ''}<code>{scope}</code></span>)}
        {lacking.length > 1 ? ' scopes' : ' scope'}, which the portal needs. Ask the service that sent you here for a link made with a key that has {lacking.length > 1 ? 'them' : 'it'}.
      </Message>
    );
  } else if (error) {
    body = <ErrorNotice error={error} />;
  } else if (!applicationId) {
    body = <Busy label="Loading your webhooks…" />;
  } else if (view.kind === 'new') {
    body = <EndpointForm client={client} applicationId={applicationId} eventTypes={eventTypes}
      onCancel={() => leaveTo({ kind: 'list' })} onSaved={(id) => go({ kind: 'endpoint', id }, 'Endpoint created.', true)} />;
  } else if (view.kind === 'endpoint') {
    const { id } = view;
    body = <EndpointDetail key={id} client={client} endpointId={id} readOnly={readOnly} initialMessage={flash}
      editing={!readOnly && view.editing === true} onEdit={() => go({ kind: 'endpoint', id, editing: true })} onEditDone={() => leaveTo({ kind: 'endpoint', id })}
      eventTypes={eventTypes} onBack={() => leaveTo({ kind: 'list' })} onDeleted={(message) => leaveTo({ kind: 'list' }, message)} />;
  } else {
    body = <EndpointsList client={client} applicationId={applicationId} readApplication={readApplication} readOnly={readOnly} pages={listPages} onPages={setListPages}
      onOpen={(id) => go({ kind: 'endpoint', id })} onAdd={() => go({ kind: 'new' })} onRestored={(id) => go({ kind: 'endpoint', id }, 'Endpoint restored.')} />;
  }
  return (
    <>
      <header class="top">
        <div class="inner">
          <p class="brand"><span class="logo" aria-hidden="true">⟲</span> Webhooks</p>
          {application && !ended && <p class="app-name">{application.name}</p>}
          {credential && !ended && readOnly && <span class="badge badge-readonly">Read-only</span>}
          {credential?.expires_at && !ended && <p class="expiry">Link valid until {formatTime(credential.expires_at)}</p>}
        </div>
      </header>
      <main class="inner" id="main" tabIndex={-1}>
        {flash && !ended && view.kind === 'list' && <Notice kind="success">{flash}</Notice>}
        {body}
      </main>
    </>
  );
}

/**
 * The scopes the key that made the link lacks, of those the portal reads with: every read it
 * needs, asked once (a 403 names one scope at a time: the page named event-types:read alone, then
 * the next one once that was given, a probe). A read-only link reads no event types.
 */
async function scopesLacking(client: Client, caught: ApiError): Promise<string[]> {
  const credential = await client<Credential>('GET', '/v1/credential');
  const reads = await Promise.allSettled([
    client('GET', `/v1/applications/${credential.application_id}`),
    credential.read_only ? null : client('GET', '/v1/event-types?limit=1'),
    client('GET', `/v1/endpoints?application_id=${credential.application_id}&per_page=1`),
  ]);
  const scopes = reads.flatMap((read) => read.status === 'rejected' ? [LACKS_SCOPE.exec(String((read.reason as Error).message))?.[1] ?? ''] : []).filter(Boolean);
  return scopes.length ? scopes : [LACKS_SCOPE.exec(caught.message)?.[1] ?? ''];
}

function endedTitle(error: ApiError): string {
  if (/expired/i.test(error.message)) return 'This link has expired';
  if (/revoked/i.test(error.message)) return 'This link was revoked';
  return 'This link does not work';
}

function Message(props: { title: string; children: preact.ComponentChildren }) {
  return (
    <section class="card message" aria-labelledby="message-title">
      <h1 id="message-title">{props.title}</h1>
      <p>{props.children}</p>
    </section>
  );
}
