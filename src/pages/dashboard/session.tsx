// What every page gets: the API client with the signed-in key, what the key is (environment,
// scopes), and small pieces that follow the key's scopes (an action it may not do is shown
// disabled, with the scope it needs).
import type { ComponentChildren } from 'preact';
import { createContext } from 'preact';
import { useContext, useEffect, useRef, useState } from 'preact/hooks';
import { holds, type Client, type Credential, type Need } from './api.ts';
import { ActionButton, Busy, ErrorNotice, formatRate, useId } from '../shared/ui.tsx';

export type Session = { client: Client; credential: Credential; can: (need: Need) => boolean };
export const SessionContext = createContext<Session | null>(null);
export function useSession(): Session {
  const session = useContext(SessionContext);
  if (!session) throw new Error('no session');
  return session;
}

/** A button for an action needing `need`: unavailable, with the reason next to it, when the key lacks it. */
export function Action(props: {
  need: Need; onClick?: () => void; children: ComponentChildren; kind?: 'primary' | 'danger' | '';
  busy?: boolean; type?: 'button' | 'submit'; disabled?: boolean; label?: string;
  /** Why the API would refuse this action to the signed-in key although it holds `need` (shown as the scope is). */
  refused?: string | null;
}) {
  const { can } = useSession();
  const allowed = can(props.need);
  const reasonId = useId('needs');
  const reason = !allowed ? `Needs the ${props.need} scope` : props.refused ?? null;
  // Unavailable (lacking the scope, busy, or not possible now: Cancel of a cancelled job) it stays
  // focusable and says aria-disabled, with its reason as its description: a disabled button
  // drops the keyboard focus to the body when it turns disabled under it (see ActionButton).
  return (
    <span class="action">
      <ActionButton type={props.type ?? 'button'} class={props.kind ?? ''} onClick={props.onClick}
        disabled={reason !== null || props.disabled} busy={props.busy} aria-label={props.label}
        aria-describedby={reason === null ? undefined : reasonId} title={reason ?? undefined}>
        {props.children}
      </ActionButton>
      {!allowed ? <span class="needs" id={reasonId}>Needs <code>{props.need}</code></span>
        : reason !== null && <span class="needs refused" id={reasonId}>{reason}</span>}
    </span>
  );
}

/** Shown instead of a page's content when the key may not even read it. */
export function NeedsScope(props: { need: Need; what: string }) {
  return <p class="notice notice-info">This key cannot see {props.what}: that needs the <code>{props.need}</code> scope.</p>;
}

/** Loads `load` when `deps` change; shows a spinner, then the error or `children(data)`. */
export function useLoad<T>(load: () => Promise<T>, deps: unknown[]) {
  const [state, setState] = useState<{ data?: T; error?: unknown; loading: boolean }>({ loading: true });
  const [tick, setTick] = useState(0);
  useEffect(() => {
    let live = true;
    setState((s) => ({ ...s, loading: true }));
    load().then((data) => live && setState({ data, loading: false }), (error) => live && setState({ error, loading: false }));
    return () => { live = false; };
  }, [...deps, tick]);
  return { ...state, reload: () => setTick((n) => n + 1) };
}

export function Loaded<T>(props: { state: { data?: T; error?: unknown; loading: boolean }; children: (data: T) => ComponentChildren; label?: string }) {
  if (props.state.error) return <ErrorNotice error={props.state.error} />;
  if (props.state.data === undefined) return <Busy {...(props.label ? { label: props.label } : {})} />;
  return <>{props.children(props.state.data)}</>;
}

/** A value the user may copy: shown in full, with a Copy button. */
export function Copyable(props: { value: string; label: string }) {
  const [copied, setCopied] = useState('');
  const copy = async () => {
    try { await navigator.clipboard.writeText(props.value); setCopied('Copied.'); } catch { setCopied('Copy failed: select the text and copy it.'); }
  };
  return (
    <div class="secret-row">
      <code class="secret" aria-label={props.label}>{props.value}</code>
      <button type="button" onClick={copy}>Copy</button>
      <span role="status" class="muted">{copied}</span>
    </div>
  );
}

export const JOB_STATUS_TEXT: Record<string, string> = {
  created: 'Queued', executing: 'Sending', awaiting_retry: 'Awaiting retry', succeeded: 'Succeeded', discarded: 'Discarded', archived: 'Archived',
};
export function JobStatus(props: { status: string }) {
  const tone = props.status === 'succeeded' ? 'active' : props.status === 'discarded' ? 'disabled' : props.status === 'awaiting_retry' ? 'paused' : 'neutral';
  return <span class={`badge badge-${tone}`}>{JOB_STATUS_TEXT[props.status] ?? props.status}</span>;
}

/**
 * A form's values that follow the route: what the user types is kept until the route's own values
 * (`fromRoute`, e.g. the filters in the address) change, by a Filter, Back, Forward or a link;
 * then the form shows the route's. Back showed the list of `status=failed` under a Status
 * dropdown still saying "Succeeded".
 */
export function useRouteDraft<T>(fromRoute: T): [T, (next: T) => void] {
  const key = JSON.stringify(fromRoute);
  // Reset in the render that sees the new route (an effect would show the old words for a frame);
  // any change of route resets, also Back to the values the draft was typed over.
  const visit = useRef({ key, draft: fromRoute });
  const [, rerender] = useState(0);
  if (visit.current.key !== key) visit.current = { key, draft: fromRoute };
  return [visit.current.draft, (draft: T) => { visit.current.draft = draft; rerender((n) => n + 1); }];
}

/** The query part of the hash route (`#/jobs?status=failed`). */
export function hashParams(): URLSearchParams {
  return new URLSearchParams(window.location.hash.split('?')[1] ?? '');
}
/** Replaces the hash route's query (keeps filters in the address, so a link or reload keeps them). */
export function setHashParams(path: string, params: Record<string, string | number | undefined>) {
  const entries = Object.entries(params).filter(([, v]) => v !== undefined && v !== '').map(([k, v]) => [k, String(v)]);
  const search = new URLSearchParams(entries).toString();
  const next = `#/${path}${search ? `?${search}` : ''}`;
  if (window.location.hash !== next) window.location.hash = next;
}

export function Rate(props: { value: number }) {
  return <span class={props.value < 90 ? 'rate low' : 'rate'}>{formatRate(props.value)}</span>;
}
