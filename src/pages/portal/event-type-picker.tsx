// The event types an endpoint receives, picked from however many the tenant has: a filter by
// name with its count of matches, the chosen ones named above the list, and a page of rows drawn
// at a time (1,501 checkboxes made a list 130,000 px tall that took 1 s to draw).
import { Component } from 'preact';
import { useMemo, useState } from 'preact/hooks';
import type { EventType } from './api.ts';
import { Busy, useId } from '../shared/ui.tsx';

/** Rows drawn before the customer filters or asks for all of them. */
const SHOWN = 50;
/** Up to this many types the list is short enough to read whole: no filter. */
const FILTER_FROM = 10;

type Props = {
  /** Every event type; null while they are read. */
  eventTypes: EventType[] | null;
  /** The names picked: the form's, which keeps them whatever the filter hides. */
  chosen: string[];
  /** Must keep its identity across the form's renders: the picker draws again only when its props change. */
  onToggle: (name: string) => void;
};

const count = (n: number) => n.toLocaleString('en');

/**
 * Drawn again only when its props change: each character typed in the form's URL re-drew every
 * row (about 50 ms a key at 1,501 types). A class for shouldComponentUpdate: preact/compat's memo
 * brought 5 KB of compat into the bundle.
 */
export class EventTypePicker extends Component<Props> {
  override shouldComponentUpdate(next: Props): boolean {
    return (Object.keys(next) as Array<keyof Props>).some((key) => next[key] !== this.props[key]);
  }
  override render() {
    return <Picker {...this.props} />;
  }
}

function Picker(props: Props) {
  const id = useId('event-types');
  const [filter, setFilter] = useState('');
  const [all, setAll] = useState(false);
  // The names chosen when the form opened come first (an endpoint's own, to edit): later picks
  // stay where they are, so a checkbox does not jump away from the pointer or the keyboard.
  const [chosenAtOpen] = useState(() => new Set(props.chosen));
  const sorted = useMemo(() => (props.eventTypes ?? []).slice().sort((a, b) =>
    Number(chosenAtOpen.has(b.name)) - Number(chosenAtOpen.has(a.name)) || a.name.localeCompare(b.name)), [props.eventTypes]);
  const chosen = useMemo(() => new Set(props.chosen), [props.chosen]);
  const needle = filter.trim().toLowerCase();
  const matching = useMemo(() => needle ? sorted.filter((type) => type.name.toLowerCase().includes(needle)) : sorted, [sorted, needle]);
  const shown = all ? matching : matching.slice(0, SHOWN);
  const total = sorted.length;

  let status = '';
  if (needle) {
    status = matching.length === 0 ? `No event type matches “${filter.trim()}”.`
      : `${count(matching.length)} of ${count(total)} event types ${matching.length === 1 ? 'matches' : 'match'}.`;
  } else if (shown.length < total) {
    status = `Showing ${count(shown.length)} of ${count(total)} event types. Filter by name to find the others.`;
  } else {
    status = `${count(total)} event types.`;
  }

  return (
    <>
      <p class="hint">The events this endpoint receives. It receives nothing until you pick at least one.</p>
      {props.eventTypes === null ? <Busy label="Loading event types…" /> : total === 0 ? <p class="hint">No event types are defined yet.</p> : (
        <>
          <p class="chosen">
            {props.chosen.length === 0 ? 'None picked yet.' : (
              <>{count(props.chosen.length)} picked: {props.chosen.map((name, i) => <span key={name}>{i > 0 && ', '}<code>{name}</code></span>)}</>
            )}
          </p>
          {total > FILTER_FROM && (
            <div class="type-filter">
              <label for={`${id}-filter`}>Filter event types</label>
              <input id={`${id}-filter`} type="search" value={filter} autoComplete="off" spellcheck={false} placeholder="for example invoice"
                aria-controls={`${id}-list`} aria-describedby={`${id}-status`} onInput={(e) => setFilter(e.currentTarget.value)} />
              <p class="hint" id={`${id}-status`} role="status">{status}</p>
            </div>
          )}
          {shown.length > 0 && (
            <ul class="type-list" id={`${id}-list`}>
              {shown.map((type) => (
                <li key={type.id}>
                  <label class="check">
                    <input type="checkbox" name="event_types" value={type.name} checked={chosen.has(type.name)} onChange={() => props.onToggle(type.name)} />
                    <span><code>{type.name}</code>{type.description && <span class="type-description">{type.description}</span>}</span>
                  </label>
                  {type.schema && (
                    <details class="schema">
                      <summary>Payload schema<span class="visually-hidden"> of {type.name}</span></summary>
                      <pre tabIndex={0}>{JSON.stringify(type.schema, null, 2)}</pre>
                    </details>
                  )}
                </li>
              ))}
            </ul>
          )}
          {shown.length < matching.length && (
            <button type="button" class="link" onClick={() => setAll(true)}>Show all {count(matching.length)}{needle ? ' matching' : ''} event types</button>
          )}
        </>
      )}
    </>
  );
}
