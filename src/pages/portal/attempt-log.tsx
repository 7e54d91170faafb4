// One endpoint's delivery attempts, newest first, 50 a page (older pages through the list's
// cursor), with a failures filter; each row opens to the response body, and a failed delivery can
// be sent again (a retry of its job), its outcome or the API's refusal shown in that row.
import { useEffect, useState } from 'preact/hooks';
import { query, type Attempt, type AttemptList, type Client, type Retried } from './api.ts';
import { ActionButton, Busy, CursorPager, ErrorNotice, Notice, formatTime, useCursorPages } from '../shared/ui.tsx';

/** A panel's part in "one outcome at a time" (endpoint-detail.tsx): whether its outcome is the one shown, and what it calls as an action starts. */
export type Speaking = { current: boolean; onAction: () => void };

type Filter = 'all' | 'failed';
/** The API's reason for a failed attempt, as the customer reads it. */
const ERROR_TEXT: Record<NonNullable<Attempt['error']>, string> = {
  http_status: 'Your server answered with a status other than 2xx.',
  timeout: 'Your server did not answer within the endpoint\'s timeout.',
  connection_error: 'The connection to your server failed or was refused.',
  dns_error: 'The endpoint\'s host name could not be resolved.',
  tls_error: 'The TLS (HTTPS) handshake with your server failed.',
  blocked_destination: 'The URL points to an address deliveries may not go to (a private or local network).',
};
const keyOf = (attempt: Attempt) => `${attempt.job_id}-${attempt.attempt}-${attempt.attempted_at}`;

export function AttemptLog(props: { client: Client; endpointId: string; readOnly: boolean; refresh: number } & Speaking) {
  const [filter, setFilter] = useState<Filter>('all');
  const pages = useCursorPages();
  const shownKey = `${filter} ${pages.cursor ?? ''}`;
  const [list, setList] = useState<{ key: string; body: AttemptList; json: string } | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [reload, setReload] = useState(0);
  const [resent, setResent] = useState<{ key: string; message?: string; error?: unknown } | null>(null);
  const [busy, setBusy] = useState(false);
  useEffect(() => {
    let live = true;
    const params = query({ status: filter === 'failed' && 'failed', limit: 50, cursor: pages.cursor });
    props.client<AttemptList>('GET', `/v1/endpoints/${props.endpointId}/attempts${params}`).then((body) => {
      if (!live) return;
      setError(null);
      const json = JSON.stringify(body);
      // The same answer again (the page refreshes every few seconds): nothing to redraw.
      setList((current) => (current && current.key === shownKey && current.json === json ? current : { key: shownKey, body, json }));
    }, (caught) => { if (live) setError(caught); });
    return () => { live = false; };
  }, [props.endpointId, shownKey, reload, props.refresh]);
  const resend = async (attempt: Attempt) => {
    setBusy(true);
    props.onAction();
    try {
      const retried = await props.client<Retried>('POST', `/v1/webhook-jobs/${attempt.job_id}/retry`);
      setResent({ key: keyOf(attempt), message: `Sent again: job ${retried.id} is queued; its new attempts appear at the top.` });
      setReload((n) => n + 1);
    } catch (caught) {
      setResent({ key: keyOf(attempt), error: caught });
    } finally {
      setBusy(false);
    }
  };
  const shown = list && list.key === shownKey ? list.body.data : null;

  return (
    <section class="card" aria-labelledby="attempts-title">
      <div class="card-head">
        <div>
          <h2 id="attempts-title" class="sub">Delivery attempts</h2>
          <p class="hint">Newest first. Open an attempt to see the response your server sent.</p>
        </div>
        <div class="segmented" role="group" aria-label="Filter attempts">
          <button type="button" aria-pressed={filter === 'all'} onClick={() => { setFilter('all'); pages.first(); }}>All</button>
          <button type="button" aria-pressed={filter === 'failed'} onClick={() => { setFilter('failed'); pages.first(); }}>Failures</button>
          <button type="button" onClick={() => setReload((n) => n + 1)}>Refresh</button>
        </div>
      </div>
      {/* A failed refresh shows its error above the list it could not refresh, which stays as it
          was (rows opened by the customer stay open). */}
      {error && <ErrorNotice error={error} />}
      {!shown ? (error ? null : <Busy label="Loading attempts…" />) : shown.length === 0 ? (
        <p class="empty">{filter === 'failed' ? 'No failed attempts.' : props.readOnly ? 'No attempts yet.' : 'No attempts yet. Send a test event to see one here.'}</p>
      ) : (
        <ul class="attempts" aria-label={filter === 'failed' ? 'Failed attempts' : 'Attempts'}>
          {shown.map((attempt) => (
            <li key={keyOf(attempt)} class={attempt.success ? 'ok' : 'failed'}>
              <details open={resent?.key === keyOf(attempt) ? true : undefined}>
                <summary>
                  <span class={`result ${attempt.success ? 'ok' : 'failed'}`}>{attempt.success ? 'Succeeded' : 'Failed'}</span>
                  <span class="code">{attempt.status_code ?? 'no answer'}</span>
                  <code class="event">{attempt.event_type}</code>
                  <span class="muted">{attempt.latency_ms} ms</span>
                  <span class="muted when">{formatTime(attempt.attempted_at)}</span>
                </summary>
                <dl class="attempt-detail">
                  <dt>Job</dt><dd><code>{attempt.job_id}</code>, attempt {attempt.attempt}</dd>
                  {attempt.error && <><dt>Why it failed</dt><dd>{ERROR_TEXT[attempt.error]} <code class="muted">{attempt.error}</code></dd></>}
                  <dt>Response body</dt>
                  <dd><pre tabIndex={0} aria-label="Response body">{attempt.response_body || '(empty)'}</pre></dd>
                </dl>
                {!props.readOnly && !attempt.success && (
                  <ActionButton busy={busy} onClick={() => void resend(attempt)}>Resend<span class="visually-hidden"> job {attempt.job_id}</span></ActionButton>
                )}
                {props.current && resent?.key === keyOf(attempt) && resent.message && <Notice kind="success">{resent.message}</Notice>}
                {props.current && resent?.key === keyOf(attempt) && <ErrorNotice error={resent.error} />}
              </details>
            </li>
          ))}
        </ul>
      )}
      {/* The pager stays while another page loads (its rows gone meanwhile): it went with them, and
          Older pressed by the keyboard left the focus on the body. */}
      <CursorPager pages={pages} next={shown ? list?.body.next_cursor : null} label="Attempt pages" />
    </section>
  );
}
