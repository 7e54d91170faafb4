// The portal's shell: reads the credential from the URL fragment (then removes it from the
// address bar and keeps it in memory only), loads the application and its event types, and
// shows the endpoints list, an endpoint, or the form to add one.
import { useEffect, useMemo, useState } from 'preact/hooks';
import { ApiError, makeClient, type Application, type Client, type EventTypeList } from './api.ts';
import { EndpointDetail } from './endpoint-detail.tsx';
import { EndpointForm } from './endpoint-form.tsx';
import { EndpointsList } from './endpoints-list.tsx';
import { Busy, ErrorNotice, Notice } from '../shared/ui.tsx';

/** `#<credential>` or `#<credential>&application_id=app_…`; read once, then gone from the URL. */
function takeFragment(): { credential: string; applicationId: string | null } {
  const parts = window.location.hash.replace(/^#/, '').split('&');
  const credential = decodeURIComponent(parts[0] ?? '');
  const params = new URLSearchParams(parts.slice(1).join('&'));
  if (window.location.hash) history.replaceState(null, '', window.location.pathname + window.location.search);
  return { credential, applicationId: params.get('application_id') };
}

const fragment = takeFragment();

type View = { kind: 'list' } | { kind: 'new' } | { kind: 'endpoint'; id: string };

export function App() {
  const [expired, setExpired] = useState(false);
  const client: Client = useMemo(() => makeClient(fragment.credential, () => setExpired(true)), []);
  const [application, setApplication] = useState<Application | null>(null);
  const [eventTypes, setEventTypes] = useState<EventTypeList['data']>([]);
  const [readOnly, setReadOnly] = useState(true);
  const [error, setError] = useState<unknown>(null);
  const [view, setView] = useState<View>({ kind: 'list' });
  const [flash, setFlash] = useState('');

  useEffect(() => {
    if (!fragment.credential || !fragment.applicationId) return;
    const id = fragment.applicationId;
    Promise.all([
      client<Application>('GET', `/v1/applications/${id}`),
      client<EventTypeList>('GET', '/v1/event-types?limit=100'),
      // Whether this link may change anything: an empty create is refused before validation
      // (403) on a read-only link and fails validation (400) otherwise; nothing is created.
      client('POST', '/v1/endpoints', {}).then(() => false, (caught) => !(caught instanceof ApiError && caught.status === 400)),
    ]).then(([app, types, isReadOnly]) => { setApplication(app); setEventTypes(types.data); setReadOnly(isReadOnly); }, setError);
  }, []);

  const go = (next: View, message = '') => { setFlash(message); setView(next); window.scrollTo(0, 0); };
  let body;
  if (!fragment.credential || !fragment.applicationId) {
    body = <Message title="This link is incomplete">Open the portal with the full link you were given. Links look like <code>…/portal#…</code>.</Message>;
  } else if (expired) {
    body = <Message title="This link has expired or was revoked">Portal links work for a limited time. Ask for a new link from the service that sent you here.</Message>;
  } else if (error) {
    body = <ErrorNotice error={error} />;
  } else if (!application) {
    body = <Busy label="Loading your webhooks…" />;
  } else if (view.kind === 'new') {
    body = <EndpointForm client={client} applicationId={application.id} eventTypes={eventTypes}
      onCancel={() => go({ kind: 'list' })} onSaved={(id) => go({ kind: 'endpoint', id }, 'Endpoint created.')} />;
  } else if (view.kind === 'endpoint') {
    body = <EndpointDetail key={view.id} client={client} applicationId={application.id} endpointId={view.id} readOnly={readOnly}
      eventTypes={eventTypes} onBack={() => go({ kind: 'list' })} onDeleted={(message) => go({ kind: 'list' }, message)} />;
  } else {
    body = <EndpointsList client={client} applicationId={application.id} readOnly={readOnly}
      onOpen={(id) => go({ kind: 'endpoint', id })} onAdd={() => go({ kind: 'new' })} onRestored={(id) => go({ kind: 'endpoint', id }, 'Endpoint restored.')} />;
  }
  return (
    <>
      <header class="top">
        <div class="inner">
          <p class="brand"><span class="logo" aria-hidden="true">⟲</span> Webhooks</p>
          {application && <p class="app-name">{application.name}</p>}
          {application && readOnly && <span class="badge badge-readonly">Read-only</span>}
        </div>
      </header>
      <main class="inner" id="main">
        {flash && view.kind !== 'new' && <Notice kind="success">{flash}</Notice>}
        {body}
      </main>
    </>
  );
}

function Message(props: { title: string; children: preact.ComponentChildren }) {
  return (
    <section class="card message" aria-labelledby="message-title">
      <h1 id="message-title">{props.title}</h1>
      <p>{props.children}</p>
    </section>
  );
}
