// Create or edit an endpoint: its URL, the event types it receives (each with its description
// and, on demand, its JSON Schema), and its delivery limits. The API's validation errors land
// under the field they name.
import { useCallback, useRef, useState } from 'preact/hooks';
import type { Client, Endpoint, EndpointCreated, EventType } from './api.ts';
import { EventTypePicker } from './event-type-picker.tsx';
import { ActionButton, ErrorNotice, Field, escapeCancels, fieldError, useAction, useFocusOnError } from '../shared/ui.tsx';

type Props = {
  client: Client; applicationId: string;
  /** Every event type; null while they are read (the form opens without waiting for them). */
  eventTypes: EventType[] | null;
  existing?: Endpoint; onSaved: (id: string) => void; onCancel: () => void;
};

export function EndpointForm(props: Props) {
  const { existing } = props;
  const [url, setUrl] = useState(existing?.url ?? '');
  const [types, setTypes] = useState<string[]>(existing?.event_types ?? []);
  const [rateLimit, setRateLimit] = useState(String(existing?.rate_limit_rps ?? ''));
  const [timeout, setTimeoutMs] = useState(String(existing?.timeout_ms ?? ''));
  const save = useAction(async () => {
    const body: Record<string, unknown> = { url: url.trim(), event_types: types };
    // What is not a number goes as typed, for the API to say so under its field (Number('abc')
    // sent null, and the API's answer named a null the customer never typed).
    const asNumber = (text: string) => /^\s*-?\d+(\.\d+)?\s*$/.test(text) ? Number(text) : text.trim();
    if (rateLimit.trim() !== '') body.rate_limit_rps = asNumber(rateLimit);
    if (timeout.trim() !== '') body.timeout_ms = asNumber(timeout);
    if (existing) {
      await props.client<Endpoint>('PATCH', `/v1/endpoints/${existing.id}`, body);
      props.onSaved(existing.id);
    } else {
      const created = await props.client<EndpointCreated>('POST', '/v1/endpoints', { application_id: props.applicationId, ...body });
      props.onSaved(created.id);
    }
  });
  const toggle = useCallback((name: string) => setTypes((current) => current.includes(name) ? current.filter((n) => n !== name) : [...current, name].sort()), []);
  const typesError = fieldError(save.error, 'event_types');
  const generalError = save.error && !['url', 'event_types', 'rate_limit_rps', 'timeout_ms'].some((p) => fieldError(save.error, p)) ? save.error : null;
  // A refused save takes the focus (and the window) to the first field the API named: with 150
  // event types the URL's error was far above the Save button the window stayed at.
  const form = useRef<HTMLFormElement>(null);
  useFocusOnError(form, save.error);

  return (
    <section class="card" aria-labelledby="form-title">
      <h1 id="form-title">{existing ? 'Edit endpoint' : 'Add an endpoint'}</h1>
      <form ref={form} onSubmit={(event) => { event.preventDefault(); void save.run(); }} onKeyDown={escapeCancels(props.onCancel, save.busy)} noValidate>
        <Field label="Endpoint URL" hint="Where we send the webhooks, for example https://example.com/webhooks." error={fieldError(save.error, 'url')}>
          {(id, describedBy) => (
            <input id={id} type="url" name="url" required value={url} aria-describedby={describedBy} autoComplete="off"
              aria-invalid={fieldError(save.error, 'url') ? 'true' : undefined}
              placeholder="https://example.com/webhooks" onInput={(e) => setUrl(e.currentTarget.value)} />
          )}
        </Field>
        <fieldset class={`field event-types${typesError ? ' has-error' : ''}`} aria-describedby={typesError ? 'event-types-error' : undefined}>
          <legend>Event types</legend>
          <EventTypePicker eventTypes={props.eventTypes} chosen={types} onToggle={toggle} />
          {typesError && <p class="field-error" id="event-types-error" role="alert">{typesError}</p>}
        </fieldset>
        <div class="row">
          <Field label="Rate limit (requests per second)" hint={existing ? 'At most this many deliveries a second.' : 'Optional; 100 when empty.'} error={fieldError(save.error, 'rate_limit_rps')}>
            {(id, describedBy) => <input id={id} name="rate_limit_rps" inputMode="numeric" value={rateLimit} aria-describedby={describedBy} onInput={(e) => setRateLimit(e.currentTarget.value)} />}
          </Field>
          <Field label="Timeout (milliseconds)" hint={existing ? 'How long we wait for your answer (1000 to 120000).' : 'Optional; 30000 (30 s) when empty, 1000 to 120000.'} error={fieldError(save.error, 'timeout_ms')}>
            {(id, describedBy) => <input id={id} name="timeout_ms" inputMode="numeric" value={timeout} aria-describedby={describedBy} onInput={(e) => setTimeoutMs(e.currentTarget.value)} />}
          </Field>
        </div>
        {generalError && <ErrorNotice error={generalError} />}
        <div class="actions">
          <ActionButton type="submit" class="primary" busy={save.busy}>{save.busy ? 'Saving…' : existing ? 'Save changes' : 'Create endpoint'}</ActionButton>
          <button type="button" onClick={props.onCancel}>Cancel</button>
        </div>
      </form>
    </section>
  );
}
