// The dashboard's shell: sign-in with an API key (kept in this tab's sessionStorage and memory,
// never localStorage or a cookie), GET /v1/credential to learn the key's environment and scopes,
// then a navigation and hash routes (#/overview, #/jobs/job_…, …) to the pages.
import { useEffect, useMemo, useState } from 'preact/hooks';
import { ApiError, holds, makeClient, type Credential } from './api.ts';
import { SessionContext, type Session } from './session.tsx';
import { Overview } from './overview.tsx';
import { ApplicationDetailPage, ApplicationsPage } from './applications.tsx';
import { EventTypesPage } from './event-types.tsx';
import { JobDetailPage, JobsPage } from './jobs.tsx';
import { EndpointDetailPage, EndpointsPage } from './endpoints.tsx';
import { OperationalPage } from './operational.tsx';
import { ApiKeysPage } from './api-keys.tsx';
import { ActionButton, Busy, Field, Notice, useFocusOnChange } from '../shared/ui.tsx';

const STORE = 'hookline.dashboard.key';

const NAV = [
  ['overview', 'Overview'], ['applications', 'Applications'], ['event-types', 'Event types'], ['jobs', 'Jobs'],
  ['endpoints', 'Endpoints'], ['operational', 'Operational webhooks'], ['settings/api-keys', 'API keys'],
] as const;

/** The route's path (`jobs/job_…`); its query (filters) is read by the page from the hash. */
function routeOf(hash: string): string {
  return hash.replace(/^#\/?/, '').split('?')[0] || 'overview';
}

export function App() {
  const [key, setKey] = useState<string | null>(() => sessionStorage.getItem(STORE));
  const [credential, setCredential] = useState<Credential | null>(null);
  const [signInError, setSignInError] = useState('');
  const [hash, setHash] = useState(window.location.hash);
  const route = routeOf(hash);

  useEffect(() => {
    const onHash = () => {
      if (routeOf(window.location.hash) !== routeOf(hash)) window.scrollTo(0, 0);
      setHash(window.location.hash); // a new query (filters) renders the page again too
    };
    window.addEventListener('hashchange', onHash);
    return () => window.removeEventListener('hashchange', onHash);
  }, [hash]);

  const signOut = (message = '') => {
    sessionStorage.removeItem(STORE);
    setKey(null);
    setCredential(null);
    setSignInError(message);
  };
  const client = useMemo(() => key ? makeClient(key, () => signOut('The service no longer accepts this API key (revoked, expired or deleted). Sign in with another key.')) : null, [key]);

  useEffect(() => {
    if (!client || credential) return;
    client<Credential>('GET', '/v1/credential').then((found) => {
      if (found.type !== 'api_key') {
        signOut('That is a portal link token: the dashboard needs an organization API key (sk_live_… or sk_test_…).');
        return;
      }
      sessionStorage.setItem(STORE, key!);
      setCredential(found);
    }, (error) => {
      signOut(error instanceof ApiError && error.status === 401
        // The API says "Invalid API key." of a revoked or expired key too: the message names all three.
        ? 'This API key was not accepted: it is invalid, revoked or expired. Check that you pasted the whole key (sk_live_… or sk_test_…), or sign in with another.'
        : `Signing in failed: ${error instanceof Error ? error.message : String(error)}`);
    });
  }, [client, credential]);

  // Read again at each change of page: another key may have changed this one's scopes or expiry
  // since sign-in, and the actions the pages offer follow them (a probe found Revoke offered
  // where the API now refused it, and the reverse, until a reload). A 401 signs out (the client).
  useEffect(() => {
    if (!client || !credential) return;
    let live = true;
    client<Credential>('GET', '/v1/credential').then((found) => {
      if (live && JSON.stringify(found) !== JSON.stringify(credential)) setCredential(found);
    }, () => {});
    return () => { live = false; };
  }, [route]);

  // A new page takes the keyboard focus on <main>, as the portal's views do: Enter on a row's link
  // left the focus on the body of the detail page, and nothing new was announced (a probe).
  useFocusOnChange(route);

  // After sign-in the keyboard focus goes to the page's heading (it was left on the body).
  useEffect(() => {
    if (!credential) return;
    const heading = document.querySelector<HTMLElement>('main h1');
    const target = heading ?? document.getElementById('main');
    if (heading) heading.tabIndex = -1;
    target?.focus();
  }, [credential]);

  // The same sign-in form while the key is checked (its button busy), so that a refused key
  // leaves the keyboard focus where it was: a spinner in the form's place took the focus with it.
  if (!key || !client || !credential) {
    return <SignIn error={signInError} checking={Boolean(key && client)} onKey={(value) => { setSignInError(''); setKey(value); }} />;
  }

  const session: Session = { client, credential, can: (need) => holds(credential.scopes, need) };
  const [page, id] = route.startsWith('settings/') ? [route, undefined] : route.split('/') as [string, string | undefined];
  let body;
  switch (page) {
    case 'applications': body = id ? <ApplicationDetailPage key={id} id={id} /> : <ApplicationsPage />; break;
    case 'event-types': body = <EventTypesPage />; break;
    case 'jobs': body = id ? <JobDetailPage key={id} id={id} /> : <JobsPage />; break;
    case 'endpoints': body = id ? <EndpointDetailPage key={id} id={id} /> : <EndpointsPage />; break;
    case 'operational': body = <OperationalPage />; break;
    // Settings has one page: `#/settings` (as a user shortens the address) is it, not "no page".
    case 'settings': case 'settings/api-keys': body = <ApiKeysPage />; break;
    case 'overview': body = <Overview />; break;
    default: body = <><h1>Page not found</h1><Notice kind="error">There is no page “{route}”. <a href="#/overview">Go to the overview</a>.</Notice></>;
  }
  const section = page.startsWith('settings') ? 'settings/api-keys' : page;
  return (
    <SessionContext.Provider value={session}>
      <a class="skip" href="#main" onClick={(e) => { e.preventDefault(); document.getElementById('main')?.focus(); }}>Skip to content</a>
      <header class={`top env-${credential.environment}`}>
        <div class="bar">
          <p class="brand"><span class="logo" aria-hidden="true">⟲</span> hookline</p>
          <p class={`env env-${credential.environment}`}>
            {credential.environment === 'live' ? 'Live' : 'Test'} environment
          </p>
          <p class="who">
            Key <strong>{credential.name}</strong>{' · '}
            <span class="muted">{credential.scopes.includes('*') ? 'all scopes' : credential.scopes.join(', ')}</span>
            {credential.expires_at && <span class="muted"> · expires {new Date(credential.expires_at).toLocaleDateString()}</span>}
          </p>
          <button type="button" onClick={() => signOut(`Signed out. To see the ${credential.environment === 'live' ? 'test' : 'live'} environment, sign in with a ${credential.environment === 'live' ? 'sk_test_' : 'sk_live_'}… key.`)}>
            Sign out / switch key
          </button>
        </div>
      </header>
      <div class="layout">
        <nav class="side" aria-label="Dashboard">
          <ul>
            {NAV.map(([to, label]) => (
              <li key={to}><a href={`#/${to}`} aria-current={section === to ? 'page' : undefined}>{to === 'settings/api-keys' ? <>Settings → {label}</> : label}</a></li>
            ))}
          </ul>
        </nav>
        <main id="main" tabIndex={-1}>{body}</main>
      </div>
    </SessionContext.Provider>
  );
}

function SignIn(props: { error: string; checking: boolean; onKey: (key: string) => void }) {
  const [value, setValue] = useState('');
  const [local, setLocal] = useState('');
  const submit = (event: Event) => {
    event.preventDefault();
    const key = value.trim();
    if (props.checking) return;
    if (!key) { setLocal('Paste an API key first.'); return; }
    props.onKey(key);
  };
  return (
    <main class="signin" id="main">
      <section class="card" aria-labelledby="signin-title">
        <p class="brand"><span class="logo" aria-hidden="true">⟲</span> hookline</p>
        <h1 id="signin-title">Sign in to the dashboard</h1>
        <p class="muted">Paste an API key of your organization. It stays in this browser tab only and is forgotten when the tab closes.
          Its environment (live or test) decides which data you see; its scopes decide what you may change.</p>
        {props.checking ? <Busy label="Checking the API key…" /> : props.error && <Notice kind="error">{props.error}</Notice>}
        <form onSubmit={submit}>
          <Field label="API key" hint="sk_live_… or sk_test_… (create one with npm run admin -- create-org, or under Settings → API keys)." error={local || undefined}>
            {(id, describedBy) => (
              <input id={id} type="password" autoComplete="off" spellcheck={false} value={value} aria-describedby={describedBy}
                onInput={(e) => { setValue((e.target as HTMLInputElement).value); setLocal(''); }} />
            )}
          </Field>
          <ActionButton type="submit" class="primary" busy={props.checking}>Sign in</ActionButton>
        </form>
      </section>
    </main>
  );
}
