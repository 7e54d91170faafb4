// Pieces every page uses once: a form field with the API's error under it, a status badge,
// a notice, a button that shows it is busy, dates as people read them.
import type { ComponentChildren } from 'preact';
import { useState } from 'preact/hooks';
import { ApiError } from '../portal/api.ts';
import './ui.css';

let nextId = 0;
export const useId = (prefix: string): string => useState(() => `${prefix}-${++nextId}`)[0];

export function Field(props: { label: string; hint?: string; error?: string | undefined; children: (id: string, describedBy: string | undefined) => ComponentChildren }) {
  const id = useId('field');
  const describedBy = [props.hint ? `${id}-hint` : '', props.error ? `${id}-error` : ''].filter(Boolean).join(' ') || undefined;
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

export function formatTime(iso: string | null | undefined): string {
  if (!iso) return '—';
  const date = new Date(iso);
  return date.toLocaleString(undefined, { year: 'numeric', month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit', second: '2-digit' });
}

export function formatRate(rate: number): string {
  return `${rate.toFixed(rate === 100 || rate === 0 ? 0 : 1)}%`;
}

/** Runs an action once at a time and keeps its error (an ApiError carries the field paths). */
export function useAction<A extends unknown[]>(action: (...args: A) => Promise<unknown>) {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<ApiError | Error | null>(null);
  const run = async (...args: A): Promise<boolean> => {
    if (busy) return false;
    setBusy(true);
    setError(null);
    try {
      await action(...args);
      return true;
    } catch (caught) {
      setError(caught instanceof Error ? caught : new Error(String(caught)));
      return false;
    } finally {
      setBusy(false);
    }
  };
  return { busy, error, run, setError };
}

export function fieldError(error: unknown, path: string): string | undefined {
  return error instanceof ApiError ? error.forField(path) : undefined;
}
