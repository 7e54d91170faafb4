// One endpoint: its state and actions (pause/resume, test event, reset a disabled circuit,
// edit, delete), its signing secret, its chart, recovery of failed deliveries and its attempts.
import { useEffect, useRef, useState } from 'preact/hooks';
import { ApiError, type Client, type Deleted, type Endpoint, type EventType, type Recovering, type Reset, type Rotated, type Stats, type TestQueued } from './api.ts';
import { AttemptLog, type Speaking } from './attempt-log.tsx';
import { EndpointForm } from './endpoint-form.tsx';
import { StatsPanel, successRate } from './stats-panel.tsx';
import { ActionButton, Busy, ErrorNotice, Field, Notice, shownUrl, StatusBadge, TypeName, fieldError, formatRate, formatTime, isolate, useAction, useFocusOnChange, useWhileShown } from '../shared/ui.tsx';

const REFRESH_MS = 3_000;

/** The parts of the page whose actions say something: the endpoint's header, the secret, recovery, the attempts. */
type Speaker = 'head' | 'secret' | 'recover' | 'attempts';

type Props = {
  client: Client; endpointId: string; readOnly: boolean;
  /** Every event type, for the edit form; null while they are read. */
  eventTypes: EventType[] | null;
  onBack: () => void; onDeleted: (message: string) => void;
  /** Whether the edit form is shown (a view of its own, with its own history entry), and the ways in and out of it. */
  editing: boolean; onEdit: () => void; onEditDone: () => void;
  /** What brought the customer here ("Endpoint created."), until the next action says more. */
  initialMessage?: string;
};

export function EndpointDetail(props: Props) {
  const { client, endpointId, readOnly } = props;
  const [endpoint, setEndpoint] = useState<Endpoint | null>(null);
  const [loadError, setLoadError] = useState<unknown>(null);
  const { editing } = props;
  useFocusOnChange(editing);
  /** What the last action said, and the status it said it of (pause, resume, re-enable): a later
   * read that finds the endpoint in another status drops it. "Circuit closed: the endpoint is active
   * again." stayed beside a Disabled badge when the receiver failed again (a probe). */
  const [notice, setNotice] = useState<{ text: string; status?: Endpoint['status'] }>({ text: props.initialMessage ?? '' });
  const setMessage = (text: string, status?: Endpoint['status']) => setNotice({ text, status });
  const message = notice.text;
  /** Who acted last: only its outcome (message or error) is shown. "Endpoint created." stayed
   * beside "Secret rotated…" and "Test event sent…", and "Deliveries are resumed." beside
   * "Copied to the clipboard." (a probe): a new action's outcome replaces the last one's. */
  const [speaker, setSpeaker] = useState<Speaker>('head');
  const [refresh, setRefresh] = useState(0);
  /** The attempts and successes of the last 24 hours, from the chart's statistics, over the window
   * `success_rate` counts: the endpoint's rate without reading its whole application (232 KB at
   * 2,000 endpoints, every 3 seconds: a probe), and "No attempts" where the API's rate would say 100. */
  const [totals, setTotals] = useState<Stats['totals'] | null>(null);
  // Every read and action is numbered as it starts. A read's answer is shown only if no newer read
  // was shown and no action started since it was asked: a refresh already on its way when the
  // customer pressed Pause answered after the pause, and the page said "Deliveries are paused"
  // under an Active badge and a Pause button until the next refresh (a probe).
  const order = useRef({ next: 0, shown: 0, action: 0 });
  const load = () => {
    const asked = ++order.current.next;
    return client<Endpoint>('GET', `/v1/endpoints/${endpointId}`).then((one) => {
      if (asked < order.current.shown || asked < order.current.action) return; // overtaken
      order.current.shown = asked;
      setEndpoint(one);
      setNotice((said) => (said.status && said.status !== one.status ? { text: '' } : said));
    });
  };
  /** An action's own answer: shown, and every read asked before it (or during it) is dropped. */
  const acting = () => { order.current.action = ++order.current.next; };
  useEffect(() => { load().catch(setLoadError); }, [endpointId]);
  // Live: the endpoint, its chart and its attempts are read again every few seconds while the
  // page is visible, so a test event, a resend or a recovery shows up without a reload. A failed
  // refresh keeps what is shown, unless the endpoint is gone (deleted elsewhere).
  const [tick, setTick] = useState(0);
  useWhileShown(REFRESH_MS, () => setTick((n) => n + 1));
  useEffect(() => {
    if (tick) load().catch((caught) => { if (caught instanceof ApiError && caught.status === 404) setLoadError(caught); });
  }, [tick]);

  const act = useAction(async (kind: 'pause' | 'resume' | 'test' | 'reset' | 'delete') => {
    acting();
    setSpeaker('head');
    // A new action's outcome replaces the last one's: "Test event sent" stayed beside the rate
    // limit's error of the next Send test event.
    setMessage('');
    if (kind === 'pause' || kind === 'resume') {
      const changed = await client<Endpoint>('PATCH', `/v1/endpoints/${endpointId}`, { status: kind === 'pause' ? 'paused' : 'active' });
      acting(); // a read asked while the change was on its way may have read the state before it
      setEndpoint(changed);
      setMessage(kind === 'pause' ? 'Deliveries are paused. They wait until you resume.' : 'Deliveries are resumed.', changed.status);
    } else if (kind === 'test') {
      const queued = await client<TestQueued>('POST', `/v1/endpoints/${endpointId}/test`);
      setMessage(`Test event sent (${queued.job_id}). It appears in the attempts below once delivered.`);
      setRefresh((n) => n + 1);
    } else if (kind === 'reset') {
      const reset = await client<Reset>('POST', `/v1/endpoints/${endpointId}/reset-circuit`);
      acting();
      setMessage(reset.message, reset.status);
      await load();
      setRefresh((n) => n + 1);
    } else {
      const deleted = await client<Deleted>('DELETE', `/v1/endpoints/${endpointId}`);
      props.onDeleted(`Endpoint deleted. You can restore it from “Deleted endpoints” for 30 days (${deleted.id}).`);
    }
  });

  if (loadError) return <><BackLink onBack={props.onBack} /><ErrorNotice error={loadError} /></>;
  if (!endpoint) return <Busy label="Loading endpoint…" />;
  if (editing) {
    return <EndpointForm client={client} applicationId={endpoint.application_id} eventTypes={props.eventTypes} existing={endpoint}
      onCancel={props.onEditDone} onSaved={() => { props.onEditDone(); setSpeaker('head'); setMessage('Changes saved.'); acting(); load().catch(setLoadError); }} />;
  }
  const confirmDelete = () => {
    if (window.confirm(`Delete the endpoint ${isolate(shownUrl(endpoint.url))}? Deliveries to it stop. You can restore it for 30 days.`)) void act.run('delete');
  };
  const speaking = (who: Speaker): Speaking => ({ current: speaker === who, onAction: () => setSpeaker(who) });
  const statusAction = endpoint.status === 'active' ? { kind: 'pause', label: 'Pause' } as const
    : endpoint.status === 'paused' ? { kind: 'resume', label: 'Resume' } as const : { kind: 'reset', label: 'Re-enable endpoint' } as const;

  return (
    <div class="detail">
      <BackLink onBack={props.onBack} />
      <section class="card" aria-labelledby="endpoint-title">
        <div class="card-head">
          <div>
            <h1 id="endpoint-title" class="url">{shownUrl(endpoint.url)}</h1>
            <p class="meta"><StatusBadge status={endpoint.status} /> {totals?.attempts === 0 ? <span>No attempts (24 h)</span> : totals && <span>{formatRate(successRate(totals))} success (24 h)</span>}
              <span>Created {formatTime(endpoint.created_at)}</span></p>
          </div>
          {!readOnly && (
            <div class="actions">
              {/* One button whose words follow the status: Pause became a new Resume element, and the focus was lost with the old one. */}
              <ActionButton class={statusAction.kind === 'reset' ? 'primary' : ''} busy={act.busy} onClick={() => void act.run(statusAction.kind)}>{statusAction.label}</ActionButton>
              <ActionButton busy={act.busy} onClick={() => void act.run('test')}>Send test event</ActionButton>
              <button type="button" onClick={props.onEdit}>Edit</button>
              <ActionButton class="danger" busy={act.busy} onClick={confirmDelete}>Delete</ActionButton>
            </div>
          )}
        </div>
        {endpoint.status === 'disabled' && (
          <Notice kind="error">Deliveries to this endpoint are stopped after repeated failures{endpoint.disabled_at ? ` (since ${formatTime(endpoint.disabled_at)})` : ''}.
            {readOnly ? '' : ' Fix the receiver, then re-enable it.'}</Notice>
        )}
        {endpoint.status === 'paused' && (
          <Notice kind="info">Paused: deliveries to this endpoint wait{readOnly ? '' : ' until you resume it'}, each for up to 48 hours from its event.</Notice>
        )}
        {speaker === 'head' && message && <Notice kind="success">{message}</Notice>}
        {speaker === 'head' && <ErrorNotice error={act.error} />}
        <dl class="facts">
          <dt>Event types</dt><dd>{endpoint.event_types.length ? endpoint.event_types.map((t) => <code key={t}><TypeName name={t} /></code>) : readOnly ? 'None' : 'None yet: it receives test events only. Edit it to pick some.'}</dd>
          <dt>Rate limit</dt><dd>{endpoint.rate_limit_rps} requests per second</dd>
          <dt>Timeout</dt><dd>{endpoint.timeout_ms} ms</dd>
          <dt>Consecutive failures</dt><dd>{endpoint.failure_count}</dd>
        </dl>
      </section>
      <SecretPanel client={client} endpoint={endpoint} readOnly={readOnly} onRotated={() => { acting(); return load(); }} {...speaking('secret')} />
      <StatsPanel client={client} endpointId={endpointId} refresh={refresh + tick} onTotals={setTotals} />
      {!readOnly && <RecoverPanel client={client} endpointId={endpointId} onRecovered={() => setRefresh((n) => n + 1)} {...speaking('recover')} />}
      <AttemptLog client={client} endpointId={endpointId} readOnly={readOnly} refresh={refresh + tick} {...speaking('attempts')} />
    </div>
  );
}

function BackLink(props: { onBack: () => void }) {
  return <button type="button" class="link back" onClick={props.onBack}>← All endpoints</button>;
}

function SecretPanel(props: { client: Client; endpoint: Endpoint; readOnly: boolean; onRotated: () => Promise<unknown> } & Speaking) {
  const { endpoint } = props;
  const [shown, setShown] = useState(false);
  const [copied, setCopied] = useState('');
  const [oldExpiry, setOldExpiry] = useState<string | null>(null);
  const rotate = useAction(async () => {
    // A new rotation's outcome replaces what the panel said before, as the endpoint's actions do:
    // "Secret rotated" stayed above the error of a later rotation, as if that one had worked too.
    props.onAction();
    setOldExpiry(null);
    setCopied(''); // and "Copied", said of the secret before this one
    const rotated = await props.client<Rotated>('POST', `/v1/endpoints/${endpoint.id}/rotate-secret`);
    await props.onRotated();
    setOldExpiry(rotated.old_secret_expires_at);
    setShown(true);
  });
  const secret = (endpoint as { secret?: string }).secret;
  const copy = async () => {
    if (!secret) return;
    props.onAction();
    setOldExpiry(null);
    try { await navigator.clipboard.writeText(secret); setCopied('Copied to the clipboard.'); } catch { setCopied('Copy failed: select the secret and copy it by hand.'); setShown(true); }
  };
  return (
    <section class="card" aria-labelledby="secret-title">
      <h2 id="secret-title" class="sub">Signing secret</h2>
      <p class="hint">Verify the <code>webhook-signature</code> header of each delivery with this secret (Standard Webhooks). Version {endpoint.secret_version}.</p>
      {props.readOnly || !secret ? (
        <p class="muted">The secret is not shown on this read-only link.</p>
      ) : (
        <>
          <div class="secret-row">
            <code class="secret" aria-label="Secret value">{shown ? secret : 'whsec_' + '•'.repeat(24)}</code>
            <button type="button" onClick={() => setShown(!shown)} aria-pressed={shown}>{shown ? 'Hide' : 'Reveal'}</button>
            <button type="button" onClick={() => void copy()}>Copy</button>
            <ActionButton busy={rotate.busy} onClick={() => {
              if (window.confirm('Rotate the secret? The current one keeps signing deliveries for 24 hours alongside the new one.')) void rotate.run();
            }}>Rotate</ActionButton>
          </div>
          {props.current && copied && <p class="hint" role="status">{copied}</p>}
        </>
      )}
      {props.current && oldExpiry && (
        <p class="hint" role="status">Secret rotated. The previous secret also signs deliveries until {formatTime(oldExpiry)}.</p>
      )}
      {props.current && <ErrorNotice error={rotate.error} />}
    </section>
  );
}

function toLocalInput(date: Date): string {
  const pad = (n: number) => String(n).padStart(2, '0');
  return `${date.getFullYear()}-${pad(date.getMonth() + 1)}-${pad(date.getDate())}T${pad(date.getHours())}:${pad(date.getMinutes())}`;
}

function RecoverPanel(props: { client: Client; endpointId: string; onRecovered: () => void } & Speaking) {
  const [since, setSince] = useState(() => toLocalInput(new Date(Date.now() - 24 * 3600_000)));
  const [result, setResult] = useState('');
  const recover = useAction(async () => {
    props.onAction();
    setResult(''); // an earlier recover's answer stayed beside this one's error (a probe)
    const date = new Date(since);
    if (Number.isNaN(date.getTime())) throw new Error('Enter a date and time.');
    const answer = await props.client<Recovering>('POST', `/v1/endpoints/${props.endpointId}/recover`, { since: date.toISOString() });
    setResult(answer.deliveries === 0 ? 'No failed deliveries in that range.' : `${answer.deliveries} failed ${answer.deliveries === 1 ? 'delivery is' : 'deliveries are'} being sent again.`);
    props.onRecovered();
  });
  const sinceError = props.current ? fieldError(recover.error, 'since') : undefined;
  return (
    <section class="card" aria-labelledby="recover-title">
      <h2 id="recover-title" class="sub">Recover failed deliveries</h2>
      <form class="inline" onSubmit={(event) => { event.preventDefault(); void recover.run(); }}>
        <Field label="Failed since" hint="Deliveries that gave up after this time (up to 14 days ago) are sent again." error={sinceError}>
          {(id, describedBy) => <input id={id} type="datetime-local" value={since} aria-describedby={describedBy} onInput={(e) => setSince(e.currentTarget.value)} />}
        </Field>
        <ActionButton type="submit" busy={recover.busy}>{recover.busy ? 'Recovering…' : 'Recover'}</ActionButton>
      </form>
      {props.current && result && <Notice kind="success">{result}</Notice>}
      {props.current && !sinceError && <ErrorNotice error={recover.error} />}
    </section>
  );
}
