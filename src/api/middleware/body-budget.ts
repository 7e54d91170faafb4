// The request bodies a web process reads, parses and holds at once, bounded in bytes: in all
// and per organization. A body is parsed into two to seven times its size of heap (a 226 KB
// job payload of small objects took 644 KB), and held until its response is written; when the
// database or the cores fell behind, nothing bounded how many were held. One tenant sending
// 283 KB jobs at 55 a second (its limit is 100) took an `npm start` process past its 160 MB
// heap in under a minute, and it died for every tenant.
//
// A request with a body reserves its length (Content-Length; the body limit when the length is
// unknown, chunked or encoded, until its bytes are read) before a byte of it is read. One that
// does not fit waits, its body unread (TCP holds it with the client), first come first served
// among those that fit, and answers 503 service_unavailable with Retry-After past the acquire
// timeout. An organization's bodies beyond its share wait behind its own, so its flood leaves
// the rest of the budget to the others. The reservation ends when the response is written or
// the client goes away.
import type { NextFunction, Request, Response } from 'express';
import { serviceUnavailable, UNAVAILABLE_RETRY_AFTER_SECONDS } from '../../errors.ts';
import { authOf } from './auth.ts';
import { BODY_LIMIT_BYTES, hasBody } from './json-body.ts';

export type BodyBudgetOptions = {
  /** Bytes of request bodies the process holds at once. */
  totalBytes: number;
  /** Bytes of one organization's request bodies the process holds at once. */
  perOrganizationBytes: number;
  /** How long a request waits for room before its 503. */
  waitMs: number;
  /** A request of `organization` waits: for its organization's share (`ownShare`) or for the process's room. */
  onWait?: (organization: string, ownShare: boolean) => void;
};

/** 24 MB in all (about 55 MB of heap for typical JSON), 8 MB an organization: 32 bodies of 256 KB, each answered in tens of milliseconds. */
export const DEFAULT_BODY_BUDGET = { totalBytes: 24 * 1024 * 1024, perOrganizationBytes: 8 * 1024 * 1024 } as const;

type Waiter = { organization: string; bytes: number; grant: () => void };

export type BodyBudget = {
  /** The middleware: reserves the request's body before it is read. */
  reserve: (req: Request, res: Response, next: NextFunction) => void;
  /** Bytes reserved now, and requests that waited for room since the start. */
  readonly held: number;
  readonly waits: number;
};

const RESERVED = Symbol('reserved body bytes');
type Reservation = { organization: string; bytes: number; settle: (bytes: number) => void };
type Reserving = Request & { [RESERVED]?: Reservation };

/**
 * Once a body is read (the JSON parser's verify hook): its reservation shrinks to the bytes it
 * has, for a chunked or encoded body reserved the limit.
 */
export function settleBody(req: Request, bytes: number): void {
  (req as Reserving)[RESERVED]?.settle(bytes);
}

/** The bytes a body will take: its Content-Length, or the limit when it is unknown or encoded (inflated, it may reach the limit). */
function declaredBytes(req: Request): number {
  if (!hasBody(req)) return 0;
  const encoding = req.headers['content-encoding'];
  const encoded = encoding !== undefined && encoding.toLowerCase() !== 'identity';
  if (req.headers['transfer-encoding'] !== undefined || encoded) return BODY_LIMIT_BYTES;
  const bytes = Number(req.headers['content-length']);
  // Past the limit, the JSON parser answers 413 without reading.
  return Number.isSafeInteger(bytes) && bytes > 0 && bytes <= BODY_LIMIT_BYTES ? bytes : 0;
}

export function makeBodyBudget(options: BodyBudgetOptions): BodyBudget {
  const { totalBytes, perOrganizationBytes, waitMs, onWait } = options;
  if (!(perOrganizationBytes >= BODY_LIMIT_BYTES && totalBytes >= perOrganizationBytes)) {
    throw new Error('a body budget holds at least one body of the limit per organization, and the total at least one organization\'s');
  }
  let held = 0;
  let waits = 0;
  const byOrganization = new Map<string, number>();
  const queue: Waiter[] = [];

  const shareFits = (organization: string, bytes: number) => (byOrganization.get(organization) ?? 0) + bytes <= perOrganizationBytes;
  const fits = (organization: string, bytes: number) => held + bytes <= totalBytes && shareFits(organization, bytes);

  function take(organization: string, bytes: number): void {
    held += bytes;
    byOrganization.set(organization, (byOrganization.get(organization) ?? 0) + bytes);
  }

  /**
   * Grants the waiters that now fit, in their order. One that waits for its organization's share
   * is passed (its flood does not hold up the others), and so are the later ones of its
   * organization, which wait behind it; one that waits for the process's room stops the grants,
   * so a large body is not passed forever by smaller ones.
   */
  function grantWaiters(): void {
    const behindOwn = new Set<string>();
    for (let i = 0; i < queue.length;) {
      const waiter = queue[i]!;
      if (!behindOwn.has(waiter.organization) && fits(waiter.organization, waiter.bytes)) {
        queue.splice(i, 1);
        take(waiter.organization, waiter.bytes);
        waiter.grant();
      } else if (!behindOwn.has(waiter.organization) && shareFits(waiter.organization, waiter.bytes)) {
        return;
      } else {
        behindOwn.add(waiter.organization);
        i += 1;
      }
    }
  }

  /**
   * Whether a waiter waits for the process's room: one whose share has room and that waits
   * behind no earlier body of its own organization. A body that fits its share but waits behind
   * its organization's is not one: counted as one, a tenant holding 8 of its 8.4 MB with one
   * more large body waiting sent small jobs that waited behind it, and every other
   * organization's bodies waited behind those, 5 s each, then 503 (a probe).
   */
  function waitedForRoom(): boolean {
    if (queue.length === 0) return false; // every request with a body asks, nearly always with none waiting
    const behindOwn = new Set<string>();
    for (const waiter of queue) {
      if (behindOwn.has(waiter.organization)) continue;
      if (shareFits(waiter.organization, waiter.bytes)) return true;
      behindOwn.add(waiter.organization);
    }
    return false;
  }

  function give(organization: string, bytes: number): void {
    held -= bytes;
    const left = (byOrganization.get(organization) ?? 0) - bytes;
    if (left > 0) byOrganization.set(organization, left);
    else byOrganization.delete(organization);
    grantWaiters();
  }

  function reserve(req: Request, res: Response, next: NextFunction): void {
    const bytes = declaredBytes(req);
    if (bytes === 0) return next();
    const organization = authOf(res).orgId;
    const hold = () => {
      const reservation: Reservation = {
        organization, bytes,
        settle: (read) => {
          if (read >= reservation.bytes) return;
          const excess = reservation.bytes - read;
          reservation.bytes = read;
          give(organization, excess);
        },
      };
      (req as Reserving)[RESERVED] = reservation;
      res.once('close', () => give(organization, reservation.bytes));
    };
    // Waiters first: a body that fits now does not pass its organization's waiting bodies, nor
    // any body waiting for the process's room.
    const behindOwn = queue.some((waiter) => waiter.organization === organization);
    if (fits(organization, bytes) && !behindOwn && !waitedForRoom()) {
      take(organization, bytes);
      hold();
      return next();
    }
    waits += 1;
    onWait?.(organization, behindOwn || !shareFits(organization, bytes));
    const leave = () => {
      clearTimeout(timer);
      res.off('close', gone);
      const index = queue.indexOf(waiter);
      if (index >= 0) queue.splice(index, 1);
    };
    const waiter: Waiter = {
      organization, bytes,
      // The grant comes from another request's close or parser: its handlers go on in a turn of their own.
      grant: () => { leave(); hold(); setImmediate(next); },
    };
    const timer = setTimeout(() => {
      leave();
      next(serviceUnavailable(behindOwn || !shareFits(organization, bytes)
        ? `This organization's earlier requests with bodies are still being read or processed; retry after ${UNAVAILABLE_RETRY_AFTER_SECONDS} s.`
        : `The service is busy: this process holds as many request bodies as it can; retry after ${UNAVAILABLE_RETRY_AFTER_SECONDS} s.`));
    }, waitMs);
    // A client gone while waiting takes its place in the queue with it.
    const gone = () => leave();
    res.once('close', gone);
    queue.push(waiter);
  }

  return {
    reserve,
    get held() { return held; },
    get waits() { return waits; },
  };
}
