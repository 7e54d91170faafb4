// One endpoint's delivery attempts, newest first, with a failures filter; each row opens to the
// response body, and a failed delivery can be sent again (a retry of its job).
import { useEffect, useState } from 'preact/hooks';
import type { Attempt, AttemptList, Client, Retried } from './api.ts';
import { Busy, ErrorNotice, Notice, formatTime, useAction } from '../shared/ui.tsx';

export function AttemptLog(props: { client: Client; endpointId: string; readOnly: boolean; refresh: number }) {
  const [filter, setFilter] = useState<'all' | 'failed'>('all');
  const [list, setList] = useState<AttemptList | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [reload, setReload] = useState(0);
  const [message, setMessage] = useState('');
  useEffect(() => {
    let live = true;
    setError(null);
    const query = filter === 'failed' ? '?status=failed&limit=50' : '?limit=50';
    props.client<AttemptList>('GET', `/v1/endpoints/${props.endpointId}/attempts${query}`)
      .then((result) => { if (live) setList(result); }, (caught) => { if (live) setError(caught); });
    return () => { live = false; };
  }, [props.endpointId, filter, reload, props.refresh]);
  const resend = useAction(async (attempt: Attempt) => {
    const retried = await props.client<Retried>('POST', `/v1/webhook-jobs/${attempt.job_id}/retry`);
    setMessage(`Delivery ${retried.id} is queued again.`);
    setReload((n) => n + 1);
  });

  return (
    <section class="card" aria-labelledby="attempts-title">
      <div class="card-head">
        <h3 id="attempts-title">Delivery attempts</h3>
        <div class="segmented" role="group" aria-label="Filter attempts">
          <button type="button" aria-pressed={filter === 'all'} onClick={() => setFilter('all')}>All</button>
          <button type="button" aria-pressed={filter === 'failed'} onClick={() => setFilter('failed')}>Failures</button>
          <button type="button" onClick={() => setReload((n) => n + 1)}>Refresh</button>
        </div>
      </div>
      {message && <Notice kind="success">{message}</Notice>}
      <ErrorNotice error={resend.error} />
      {error ? <ErrorNotice error={error} /> : !list ? <Busy label="Loading attempts…" /> : list.data.length === 0 ? (
        <p class="empty">{filter === 'failed' ? 'No failed attempts.' : 'No attempts yet. Send a test event to see one here.'}</p>
      ) : (
        <ul class="attempts">
          {list.data.map((attempt) => (
            <li key={`${attempt.job_id}-${attempt.attempt}-${attempt.attempted_at}`} class={attempt.success ? 'ok' : 'failed'}>
              <details>
                <summary>
                  <span class={`result ${attempt.success ? 'ok' : 'failed'}`}>{attempt.success ? 'Succeeded' : 'Failed'}</span>
                  <span class="code">{attempt.status_code ?? attempt.error ?? '—'}</span>
                  <code class="event">{attempt.event_type}</code>
                  <span class="muted">{attempt.latency_ms} ms</span>
                  <span class="muted when">{formatTime(attempt.attempted_at)}</span>
                </summary>
                <dl class="attempt-detail">
                  <dt>Job</dt><dd><code>{attempt.job_id}</code> (attempt {attempt.attempt})</dd>
                  {attempt.error && <><dt>Error</dt><dd>{attempt.error}</dd></>}
                  <dt>Response body</dt>
                  <dd><pre tabIndex={0} aria-label="Response body">{attempt.response_body || '(empty)'}</pre></dd>
                </dl>
                {!props.readOnly && !attempt.success && (
                  <button type="button" disabled={resend.busy} onClick={() => void resend.run(attempt)}>Resend</button>
                )}
              </details>
            </li>
          ))}
        </ul>
      )}
    </section>
  );
}
