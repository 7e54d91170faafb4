// Answers written a part at a time, each part waiting for the client to take the last one: a
// large answer is never held whole in the web process, and the event loop serves other requests
// between its parts.
import type { Response } from 'express';
import { RequestAbandonedError } from '../db/availability.ts';
import { viewFor } from './middleware/auth.ts';

/** Writes `chunk`, and waits for the client to take it when its buffer is full; a client gone away is an abandoned request. */
export function writeOrAbandon(res: Response, chunk: string): Promise<void> {
  // A response whose connection has closed says so (it may have before this write, and then
  // emits no 'close' again).
  if (res.destroyed) return Promise.reject(new RequestAbandonedError());
  if (res.write(chunk)) return Promise.resolve();
  if (res.destroyed) return Promise.reject(new RequestAbandonedError());
  return new Promise((resolve, reject) => {
    const drained = () => { res.off('close', closed); resolve(); };
    const closed = () => { res.off('drain', drained); reject(new RequestAbandonedError()); };
    res.once('drain', drained);
    res.once('close', closed);
  });
}

/**
 * A list's page: `{ data, ...tail }` (200). Items `complete` says are whole are written as they
 * are; the others are first completed (`fill`, one at a time, each read when its turn comes), and
 * the page is then written item by item. A page without any to complete is one `res.json`, as
 * every page was.
 */
export async function sendPage<Row, Whole extends Row>(
  res: Response, rows: readonly Row[], tail: Record<string, unknown>,
  view: (row: Whole) => unknown, complete: (row: Row) => row is Whole, fill: (row: Row) => Promise<Whole>,
): Promise<void> {
  if (rows.every(complete)) {
    res.json({ data: rows.map(view), ...tail });
    return;
  }
  res.status(200).type('application/json');
  let separator = '{"data":[';
  for (const row of rows) {
    const whole = complete(row) ? row : await fill(row);
    // As res.json would send it to this credential (a read-only portal link: no secret, no
    // header values), which a written part does not pass through.
    await writeOrAbandon(res, separator + JSON.stringify(viewFor(res, view(whole))));
    separator = ',';
  }
  res.end(`],${JSON.stringify(tail).slice(1)}`);
}
