// Pieces every page uses once: a form field with the API's error under it, a status badge,
// a notice, a button that shows it is busy, dates as people read them, and the pagers of the
// API's two kinds of list, so that no list shows its first page as if it were all.
import { Fragment, type ButtonHTMLAttributes, type ComponentChildren, type RefObject } from 'preact';
import { useEffect, useLayoutEffect, useRef, useState } from 'preact/hooks';
import { ApiError } from '../portal/api.ts';
import './ui.css';

let nextId = 0;
export const useId = (prefix: string): string => useState(() => `${prefix}-${++nextId}`)[0];

/**
 * A label, its control (made by `children` with the id and aria-describedby to use), a hint and
 * the API's error. A control with an error says so (aria-invalid="true") whatever `children`
 * makes: a form's fields had aria-describedby pointing at the error but were not marked invalid.
 */
export function Field(props: { label: string; hint?: string; error?: string | undefined; children: (id: string, describedBy: string | undefined) => ComponentChildren }) {
  const id = useId('field');
  const describedBy = [props.hint ? `${id}-hint` : '', props.error ? `${id}-error` : ''].filter(Boolean).join(' ') || undefined;
  useLayoutEffect(() => {
    const control = document.getElementById(id);
    if (props.error) control?.setAttribute('aria-invalid', 'true'); else control?.removeAttribute('aria-invalid');
  }, [props.error]);
  return (
    <div class={`field${props.error ? ' has-error' : ''}`}>
      <label for={id}>{props.label}</label>
      {props.children(id, describedBy)}
      {props.hint && <p class="hint" id={`${id}-hint`}>{props.hint}</p>}
      {props.error && <p class="field-error" id={`${id}-error`} role="alert">{props.error}</p>}
    </div>
  );
}

export function Notice(props: { kind: 'error' | 'info' | 'success'; children: ComponentChildren }) {
  return <div class={`notice notice-${props.kind}`} role={props.kind === 'error' ? 'alert' : 'status'}>{props.children}</div>;
}

export function ErrorNotice(props: { error: unknown }) {
  if (!props.error) return null;
  const message = props.error instanceof Error ? props.error.message : String(props.error);
  return <Notice kind="error">{message}</Notice>;
}

const STATUS_TEXT: Record<string, string> = { active: 'Active', paused: 'Paused', disabled: 'Disabled' };
export function StatusBadge(props: { status: string }) {
  return <span class={`badge badge-${props.status}`}>{STATUS_TEXT[props.status] ?? props.status}</span>;
}

export function Busy(props: { label?: string }) {
  return <p class="loading" role="status"><span class="spinner" aria-hidden="true" />{props.label ?? 'Loading…'}</p>;
}

/**
 * A new view of a page takes the keyboard focus on its `<main id="main" tabIndex={-1}>`, as a
 * new page would: left where it was, focus stayed on a button that is gone, or on the body.
 */
export function useFocusOnChange(change: unknown): void {
  const [first] = useState(change);
  useEffect(() => {
    if (change !== first) document.getElementById('main')?.focus();
  }, [change]);
}

/** `act` every `everyMs` while `active` and the tab is shown: a hidden tab asks the API nothing. */
export function useWhileShown(everyMs: number, act: () => void, active = true): void {
  const latest = useRef(act);
  latest.current = act;
  useEffect(() => {
    if (!active) return;
    const timer = setInterval(() => { if (!document.hidden) latest.current(); }, everyMs);
    return () => clearInterval(timer);
  }, [everyMs, active]);
}

export function formatTime(iso: string | null | undefined): string {
  if (!iso) return '—';
  const date = new Date(iso);
  return date.toLocaleString(undefined, { year: 'numeric', month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit', second: '2-digit' });
}

/**
 * A date and time in a table cell, as formatTime says it: the day and the time each stay whole,
 * the line may break only between them ("Nov 30, 2026," / "08:40:53 AM"); a squeezed column split
 * a date over three lines, mid-word.
 */
export function When(props: { iso: string | null | undefined }) {
  if (!props.iso) return <>{formatTime(props.iso)}</>;
  const date = new Date(props.iso);
  const day = date.toLocaleDateString(undefined, { year: 'numeric', month: 'short', day: 'numeric' });
  const time = date.toLocaleTimeString(undefined, { hour: '2-digit', minute: '2-digit', second: '2-digit' });
  return <time class="date" dateTime={props.iso}><span>{day},</span> <span>{time}</span></time>;
}

/**
 * An event type's name, which may break only after its dots (`user.` / `signed_up`): broken
 * anywhere, a narrow column showed "user.sig" / "ned_up". A long segment still fits its cell.
 */
export function TypeName(props: { name: string }) {
  const parts = props.name.split(/(?<=\.)/);
  return <>{parts.map((part, i) => <Fragment key={i}>{i > 0 && <wbr />}{part}</Fragment>)}</>;
}

/** Event type names or scopes in a cell: each one whole, the list wrapping between them. */
export function Names(props: { names: readonly string[]; empty?: string }) {
  if (props.names.length === 0) return <>{props.empty ?? '—'}</>;
  return <>{props.names.map((name, i) => <Fragment key={name}><span class="name-item"><TypeName name={name} />{i < props.names.length - 1 ? ',' : ''}</span>{' '}</Fragment>)}</>;
}

export function formatRate(rate: number): string {
  return `${rate.toFixed(rate === 100 || rate === 0 ? 0 : 1)}%`;
}

/**
 * A button for an action that takes a while (`busy` while it runs) or is not possible now
 * (`disabled`): it stays an enabled, focusable button that says aria-disabled="true" and ignores
 * activation. A `disabled` button drops the keyboard focus to the body: after Enter on Pause,
 * Send test event or Cancel, focus was nowhere and a second Enter did nothing.
 */
export function ActionButton(props: ButtonHTMLAttributes<HTMLButtonElement> & { busy?: boolean }) {
  const { busy, disabled, onClick, ...rest } = props;
  const off = Boolean(busy) || disabled === true;
  return (
    <button type="button" {...rest} aria-disabled={off ? 'true' : undefined} aria-busy={busy ? 'true' : undefined}
      onClick={(event) => { if (off) { event.preventDefault(); return; } onClick?.(event); }} />
  );
}

/**
 * After a failed submit, the keyboard focus goes to the first control of `form` with an error
 * (aria-invalid, or in a `.has-error` group), which scrolls it into view: with a long form the
 * error showed at its top while the window stayed at the Save button.
 */
export function useFocusOnError(form: RefObject<HTMLElement | null>, error: unknown): void {
  useEffect(() => {
    if (!error) return;
    form.current?.querySelector<HTMLElement>('[aria-invalid="true"], .has-error input, .has-error select, .has-error textarea')?.focus();
  }, [error]);
}

/**
 * A form's keydown handler: Escape leaves it as its Cancel button does (unless a save is on its
 * way: its answer decides where the page goes). A native control that uses Escape itself (an open
 * select's list) keeps it.
 */
export const escapeCancels = (cancel: () => void, busy: boolean) => (event: KeyboardEvent) => {
  if (event.key !== 'Escape' || event.defaultPrevented || busy) return;
  event.preventDefault();
  cancel();
};

/**
 * A URL as the pages show it: its bidirectional controls percent-encoded, as a request to it sends
 * them. A right-to-left override showed `…/\u202Egpj.exe` as `…/exe.jpg` (a probe).
 */
export const shownUrl = (url: string): string => url.replace(/[\u061C\u200E\u200F\u202A-\u202E\u2066-\u2069]/g, (c) => encodeURIComponent(c));

/** A name someone typed, isolated for a text the page writes around it (a native confirm()): an unterminated right-to-left override in it reversed the words after it. */
export const isolate = (name: string): string => `\u2068${name}\u2069`;

/** Runs an action once at a time and keeps its error (an ApiError carries the field paths). */
export function useAction<A extends unknown[]>(action: (...args: A) => Promise<unknown>) {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<ApiError | Error | null>(null);
  // Also true between a click and the render that shows `busy`: a second Enter then started it twice.
  const running = useRef(false);
  const run = async (...args: A): Promise<boolean> => {
    if (running.current) return false;
    running.current = true;
    setBusy(true);
    setError(null);
    try {
      await action(...args);
      return true;
    } catch (caught) {
      setError(caught instanceof Error ? caught : new Error(String(caught)));
      return false;
    } finally {
      running.current = false;
      setBusy(false);
    }
  };
  return { busy, error, run, setError };
}

export function fieldError(error: unknown, path: string): string | undefined {
  return error instanceof ApiError ? error.forField(path) : undefined;
}

/**
 * Previous / next through an offset list's pages; nothing when it has one page. `label` names the
 * list (each pager on a page needs its own). At either end the button is an ActionButton that says
 * aria-disabled and ignores activation: a `disabled` Next turned off under the keyboard user who
 * had just pressed it to reach the last page, and the focus fell to the body.
 */
export function Pager(props: { page: number; totalPages: number; onPage: (page: number) => void; label: string }) {
  if (props.totalPages <= 1) return null;
  return (
    <nav class="pager" aria-label={props.label}>
      <ActionButton disabled={props.page <= 1} onClick={() => props.onPage(props.page - 1)}>Previous</ActionButton>
      <span>Page {props.page} of {props.totalPages}</span>
      <ActionButton disabled={props.page >= props.totalPages} onClick={() => props.onPage(props.page + 1)}>Next</ActionButton>
    </nav>
  );
}

/**
 * Where a cursor list (newest first) is: the cursors of the pages walked so far, so that "Newer"
 * goes back one page; `cursor` is the current page's (undefined: the first).
 * A list keeps showing its page while the next one loads, so an "Older" clicked again meanwhile
 * offers the cursor of the page already asked for: taken again, it said "Page 3" over page 2's
 * rows, and every page after was one off (a full test run clicked that fast). A cursor already
 * walked is not taken again.
 */
export function useCursorPages() {
  const [cursors, setCursors] = useState<string[]>([]);
  // Whether the first page was reached by Newer: it has older pages then, though its own cursor
  // is not known until it has loaded.
  const [back, setBack] = useState(false);
  return {
    cursor: cursors[cursors.length - 1] as string | undefined,
    page: cursors.length + 1,
    back,
    older: (next: string) => setCursors((walked) => (walked.includes(next) ? walked : [...walked, next])),
    newer: () => { setCursors(cursors.slice(0, -1)); setBack(true); },
    first: () => { setCursors([]); setBack(false); },
  };
}

/**
 * Newer / older through a cursor list; nothing when its first page is all of it. Its buttons turn
 * off as Pager's do (aria-disabled, the focus kept): Older pressed to reach the last page no longer
 * drops the focus to the body. Nor does Newer back to the first page: the pager went while that
 * page loaded (its `next` not known yet) and came back without the focus; it stays now, Older off
 * meanwhile. `next`: the shown page's cursor (null or undefined while a page loads).
 */
export function CursorPager(props: { pages: ReturnType<typeof useCursorPages>; next: string | null | undefined; label: string }) {
  const { pages, next } = props;
  if (pages.page === 1 && !next && !pages.back) return null;
  return (
    <nav class="pager" aria-label={props.label}>
      <ActionButton disabled={pages.page === 1} onClick={pages.newer}>Newer</ActionButton>
      <span>Page {pages.page}</span>
      <ActionButton disabled={!next} onClick={() => next && pages.older(next)}>Older</ActionButton>
    </nav>
  );
}
