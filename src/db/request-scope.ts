// Whether the client of the HTTP request being served went away, carried through async calls, so
// the pool can refuse to start (or commit) database work for a client that has already gone; and
// whose request it is, so that one organization's requests cannot hold every connection.
import { AsyncLocalStorage } from 'node:async_hooks';

/**
 * One request's abandonment: `aborted` once its client went away before the response was
 * written, and the listeners told then. (An AbortController a request cost an EventTarget and
 * its signal for every request, though nearly none is ever abandoned.)
 */
export class RequestScope {
  #aborted = false;
  #listeners: Array<() => void> | undefined;
  /**
   * The organization the request acts for, once authenticated: the pool holds one
   * organization's requests to a share of its connections (pool-guard.ts).
   */
  organization: string | undefined;
  /**
   * Who in the organization calls: an API key, or a portal link's application (all its links
   * together). The organization's heavy reads take turns between callers (heavy-reads.ts), so
   * one customer's burst through a portal link does not queue its operator's reads behind it.
   */
  caller: string | undefined;
  /**
   * The application whose portal link made the request, if one did: its requests hold at most
   * half of the organization's share of connections (pool-guard.ts), so the operator's own keep
   * the rest.
   */
  customer: string | undefined;

  get aborted(): boolean {
    return this.#aborted;
  }

  /** Calls `listener` once, when the client goes away; returns what stops listening. */
  onAbort(listener: () => void): () => void {
    (this.#listeners ??= []).push(listener);
    return () => {
      const index = this.#listeners?.indexOf(listener) ?? -1;
      if (index >= 0) this.#listeners?.splice(index, 1);
    };
  }

  /** The client went away: every listener is told, once. */
  abort(): void {
    if (this.#aborted) return;
    this.#aborted = true;
    const listeners = this.#listeners ?? [];
    this.#listeners = undefined;
    for (const listener of listeners) listener();
  }
}

export const requestScope = new AsyncLocalStorage<RequestScope>();

export const currentRequestScope = (): RequestScope | undefined => requestScope.getStore();
