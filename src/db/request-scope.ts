// The abort signal of the HTTP request being served, carried through async calls, so the pool
// can refuse to start (or commit) database work for a client that has already gone away.
import { AsyncLocalStorage } from 'node:async_hooks';

export type RequestScope = { signal: AbortSignal };

export const requestScope = new AsyncLocalStorage<RequestScope>();

export const currentRequestSignal = (): AbortSignal | undefined => requestScope.getStore()?.signal;
