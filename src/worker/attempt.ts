// One delivery attempt (decisions sections 7 and 8): destination re-check, DNS pinned to checked
// addresses, POST with a deadline, first 4 KB of the answer. Whatever the receiver or the network
// does comes back as an AttemptOutcome value, never as a thrown error.
import dns from 'node:dns';
import type { LookupAddress } from 'node:dns';
import { isIP } from 'node:net';
import type { LookupFunction } from 'node:net';
import { Agent, type Dispatcher } from 'undici';
import { checkDestinationUrl, isBlockedAddress } from '../core/destinations.ts';

export type AttemptRequest = {
  url: string;
  body: string;
  headers: Record<string, string>;
  timeoutMs: number;
  /**
   * The longest the attempt may take in all (the delivery's lease, less a margin): time spent
   * waiting for one of the worker's own connections to the origin does not count against
   * `timeoutMs`, but does against this. `timeoutMs` when absent.
   */
  limitMs?: number;
  allowPrivate: boolean;
  /**
   * A pool of connections of its own for this tenant (per origin), apart from the pool shared
   * by attempts that name none: the worker names a tenant whose receivers are slow, so that
   * its hanging requests never hold the connections others wait for.
   */
  tenant?: string;
  /**
   * Asked when the request gets its connection, before anything is sent: false withdraws it (the
   * attempt rejects with Withdrawn). A request may wait there for one of the worker's
   * connections to the origin for as long as the receiver's other requests hang.
   */
  stillWanted?: () => boolean;
};

/** The attempt was withdrawn before anything was sent (AttemptRequest.stillWanted). */
export class Withdrawn extends Error {
  constructor() {
    super('withdrawn before it was sent');
  }
}

export type AttemptError = 'timeout' | 'connection_error' | 'dns_error' | 'blocked_destination' | 'tls_error' | 'http_status';

export type AttemptOutcome = {
  success: boolean;
  statusCode: number | null;
  responseBody: string;
  latencyMs: number;
  error: null | AttemptError;
  retryAfterSeconds: number | null;
};

/** Resolves a host name to every address it has, like `dns.promises.lookup(name, { all: true })`. */
export type Lookup = (hostname: string) => Promise<LookupAddress[]>;

export type AttempterOptions = {
  /** Most connections kept per pool (the shared one, or a named tenant's) and origin (undici Agent `connections`); unlimited when absent. */
  connections?: number;
  /** A tenant's pool unused this long is closed (its connections, its memory); default 2 minutes. */
  idleAgentMs?: number;
  /** Replaceable so tests can make a name resolve to a private address without real DNS. */
  lookup?: Lookup;
};

export type Attempter = {
  attempt(req: AttemptRequest): Promise<AttemptOutcome>;
  /** The pools open now, one per mode and tenant that attempted within `idleAgentMs`. */
  agentCount(): number;
  /**
   * Attempts that name no tenant use new pools from now on. The old ones keep the requests they
   * have (a tenant's hanging requests sent before it was found slow, holding the connections to
   * an origin) and close like a tenant's pool, once idle for `idleAgentMs`.
   */
  renewSharedPools(): void;
  /** Closes every pool; requests still open are aborted (their attempts end as connection errors). */
  close(): Promise<void>;
};

const IDLE_AGENT_MS = 120_000;
/** The connections the worker's pools keep to one origin at most (undici Agent `connections`). */
export const CONNECTIONS_PER_ORIGIN = 64;

const RESPONSE_BODY_LIMIT = 4096;

const defaultLookup: Lookup = (hostname) => dns.promises.lookup(hostname, { all: true });

// Errors that mean the caller misused the attempter (bad header value, attempt after close): those
// are bugs to surface, not a receiver's behaviour to record.
const PROGRAMMING_ERRORS = new Set(['UND_ERR_INVALID_ARG', 'UND_ERR_CLOSED', 'UND_ERR_DESTROYED', 'ERR_INVALID_ARG_TYPE', 'ERR_INVALID_CHAR']);
const TIMEOUT_ERRORS = new Set(['UND_ERR_CONNECT_TIMEOUT', 'UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_BODY_TIMEOUT', 'ETIMEDOUT']);
const DNS_ERRORS = new Set(['ENOTFOUND', 'EAI_AGAIN', 'EAI_FAIL', 'EAI_NODATA', 'EAI_NONAME', 'ENODATA']);
// OpenSSL's certificate verification results, which Node passes through as error codes.
const TLS_CERT_ERRORS = /^(CERT_|UNABLE_TO_|DEPTH_ZERO_SELF_SIGNED_CERT$|SELF_SIGNED_CERT_IN_CHAIN$|HOSTNAME_MISMATCH$|INVALID_CA$|INVALID_PURPOSE$|PATH_LENGTH_EXCEEDED$)/;

class Refused extends Error {
  readonly error: AttemptError;
  constructor(error: AttemptError, message: string) {
    super(message);
    this.error = error;
  }
}

/** Every `code` on an error, its `cause` chain and, for AggregateError, its members. */
function errorCodes(err: unknown, seen = new Set<unknown>()): string[] {
  if (typeof err !== 'object' || err === null || seen.has(err)) return [];
  seen.add(err);
  const codes: string[] = [];
  const code = (err as { code?: unknown }).code;
  if (typeof code === 'string') codes.push(code);
  codes.push(...errorCodes((err as { cause?: unknown }).cause, seen));
  if (err instanceof AggregateError) for (const member of err.errors) codes.push(...errorCodes(member, seen));
  return codes;
}

/** What a failed exchange counts as; `null` for errors that are the caller's bug. */
function classify(err: unknown, deadlinePassed: boolean): AttemptError | null {
  if (err instanceof Refused) return err.error;
  // Whatever undici threw on abort (the signal's reason, a socket destroyed mid-read), the cause
  // is the deadline.
  if (deadlinePassed) return 'timeout';
  const codes = errorCodes(err);
  if (codes.some((c) => PROGRAMMING_ERRORS.has(c))) return null;
  if (codes.some((c) => TIMEOUT_ERRORS.has(c))) return 'timeout';
  if (codes.some((c) => c.startsWith('ERR_SSL_') || c.startsWith('ERR_TLS_') || TLS_CERT_ERRORS.test(c))) return 'tls_error';
  if (codes.some((c) => DNS_ERRORS.has(c))) return 'dns_error';
  // Refused, reset, closed early, unreachable, an unparseable response: the receiver's side of
  // the connection did not hold up.
  return 'connection_error';
}

/** `promise`, or a rejection as soon as `signal` aborts, whichever comes first. */
function untilAborted<T>(promise: Promise<T>, signal: AbortSignal): Promise<T> {
  promise.catch(() => {}); // the loser of the race must not become an unhandled rejection
  return new Promise<T>((resolve, reject) => {
    if (signal.aborted) return reject(signal.reason);
    const onAbort = () => reject(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(resolve, reject).finally(() => signal.removeEventListener('abort', onAbort));
  });
}

const MONTHS = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'];
const MONTH = `(${MONTHS.join('|')})`;
const TIME = '(\\d{2}):(\\d{2}):(\\d{2})';
// RFC 9110 section 5.6.7: IMF-fixdate, and the obsolete RFC 850 and asctime forms a recipient
// must still accept. Nothing else: Date.parse reads "in 2030" as 1 January 2030 and "x 5" as a
// day in 2001, and a receiver's garbage must not put a delivery past its window.
const IMF_FIXDATE = new RegExp(`^(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun), (\\d{2}) ${MONTH} (\\d{4}) ${TIME} GMT$`);
const RFC_850 = new RegExp(`^(?:Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday), (\\d{2})-${MONTH}-(\\d{2}) ${TIME} GMT$`);
const ASCTIME = new RegExp(`^(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun) ${MONTH} ( \\d|\\d{2}) ${TIME} (\\d{4})$`);

/** An HTTP date in milliseconds since the epoch, or NaN when the text is not one. */
export function parseHttpDate(text: string, now = Date.now()): number {
  let fields: { day: string; month: string; year: number; time: string[] } | null = null;
  const imf = IMF_FIXDATE.exec(text);
  const rfc850 = imf ? null : RFC_850.exec(text);
  const asctime = imf || rfc850 ? null : ASCTIME.exec(text);
  if (imf) fields = { day: imf[1] ?? '', month: imf[2] ?? '', year: Number(imf[3]), time: imf.slice(4, 7) };
  if (rfc850) {
    // A two-digit year more than 50 years ahead is in the past century (RFC 9110).
    const thisYear = new Date(now).getUTCFullYear();
    let year = Math.floor(thisYear / 100) * 100 + Number(rfc850[3]);
    if (year > thisYear + 50) year -= 100;
    fields = { day: rfc850[1] ?? '', month: rfc850[2] ?? '', year, time: rfc850.slice(4, 7) };
  }
  if (asctime) fields = { day: (asctime[2] ?? '').trim(), month: asctime[1] ?? '', year: Number(asctime[6]), time: asctime.slice(3, 6) };
  if (!fields) return Number.NaN;
  const day = Number(fields.day);
  const [hour, minute, second] = fields.time.map(Number) as [number, number, number];
  if (day < 1 || day > 31 || hour > 23 || minute > 59 || second > 60) return Number.NaN;
  const at = new Date(0);
  at.setUTCFullYear(fields.year, MONTHS.indexOf(fields.month), day);
  at.setUTCHours(hour, minute, Math.min(second, 59), 0); // a leap second as :59
  return at.getUTCDate() === day ? at.getTime() : Number.NaN; // 31 Feb rolls over: not a date
}

/** Seconds to wait from a `Retry-After` value: delta-seconds or an HTTP date; `null` if neither. */
export function parseRetryAfter(value: string | undefined, now = Date.now()): number | null {
  if (value === undefined) return null;
  const text = value.trim();
  if (/^\d+$/.test(text)) return Number(text);
  const at = parseHttpDate(text, now);
  if (Number.isNaN(at)) return null;
  return Math.max(0, Math.ceil((at - now) / 1000));
}

function headerValue(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}

/**
 * The addresses each host name was checked to have, for the Agent's `connect.lookup`: a connection
 * goes only where the check approved, whatever DNS answers by the time undici connects.
 */
class PinnedHosts {
  readonly #pins = new Map<string, { addresses: LookupAddress[]; users: number }>();

  pin(hostname: string, addresses: LookupAddress[]): () => void {
    const entry = this.#pins.get(hostname);
    // The newest answer wins for later connections; an older one was checked too.
    if (entry) {
      entry.addresses = addresses;
      entry.users += 1;
    } else {
      this.#pins.set(hostname, { addresses, users: 1 });
    }
    return () => {
      const current = this.#pins.get(hostname);
      if (current && --current.users === 0) this.#pins.delete(hostname);
    };
  }

  get(hostname: string): LookupAddress[] | undefined {
    return this.#pins.get(hostname)?.addresses;
  }
}

type PinnedAgent = { agent: Agent; pins: PinnedHosts };

function makePinnedAgent(allowPrivate: boolean, connections: number | undefined): PinnedAgent {
  const pins = new PinnedHosts();
  // net.connect calls this for host names only (IP literals are connected to directly), with
  // `all: true` when it tries several addresses (autoSelectFamily), else for a single one.
  const lookup: LookupFunction = (hostname, options, callback) => {
    const addresses = pins.get(hostname);
    // A second line of defence: an unpinned name or a private address on the strict Agent means a
    // bug here, and the connection must not happen.
    if (!addresses || addresses.length === 0 || (!allowPrivate && addresses.some((a) => isBlockedAddress(a.address)))) {
      const err = Object.assign(new Error(`refusing to connect to unchecked host ${hostname}`), { code: 'ERR_UNCHECKED_DESTINATION' });
      return callback(err, '');
    }
    if (options.all) return callback(null, addresses);
    const [first] = addresses as [LookupAddress, ...LookupAddress[]];
    return callback(null, first.address, first.family);
  };
  const agent = new Agent({
    connect: { lookup },
    ...(connections === undefined ? {} : { connections }),
  });
  return { agent, pins };
}

/** `sending`: this pool's attempts dispatched and not yet ended, per origin (to know when one must wait for a connection). */
type TenantAgent = PinnedAgent & { active: number; lastUsed: number; sending: Map<string, number> };

export function makeAttempter(options: AttempterOptions = {}): Attempter {
  const lookupHost = options.lookup ?? defaultLookup;
  const idleAgentMs = options.idleAgentMs ?? IDLE_AGENT_MS;
  // One pooled Agent per mode and named tenant (and one per mode shared by the rest), made when
  // first needed. Per tenant: the connections to an origin (64 in the worker) were shared by
  // every tenant whose endpoints use it, so one tenant hanging many attempts on a common origin
  // (a SaaS inbox) made the others' attempts there wait for a connection inside their own
  // timeout, and time out unsent, counting toward their circuit breakers. Per mode: a process
  // runs in one, and two keep a connection opened to a private address under allowPrivate from
  // ever being reused by a strict attempt.
  const agents = new Map<string, TenantAgent>();
  let closed = false;
  /** The shared pools' generation: renewSharedPools() starts a new one. */
  let sharedGeneration = 0;

  const agentFor = (allowPrivate: boolean, tenant: string | undefined): TenantAgent => {
    // Tenants' ids (org_…) never start with '#'.
    const key = `${allowPrivate ? 'private' : 'strict'}:${tenant ?? `#${sharedGeneration}`}`;
    let pinned = agents.get(key);
    if (!pinned) {
      pinned = { ...makePinnedAgent(allowPrivate, options.connections), active: 0, lastUsed: 0, sending: new Map() };
      agents.set(key, pinned);
    }
    return pinned;
  };
  // Close the pools of tenants that have not attempted for a while: their idle connections
  // have closed by then (undici keeps one 4 s), and the Agent objects would pile up with every
  // tenant ever delivered for.
  const sweep = setInterval(() => {
    const now = performance.now();
    for (const [key, pinned] of agents) {
      if (pinned.active > 0 || now - pinned.lastUsed < idleAgentMs) continue;
      agents.delete(key);
      pinned.agent.close().catch(() => {});
    }
  }, Math.min(idleAgentMs, 60_000));
  sweep.unref();

  /** The checked addresses of a host name; throws Refused when it cannot be delivered to. */
  async function resolve(hostname: string, allowPrivate: boolean, signal: AbortSignal): Promise<LookupAddress[]> {
    let addresses: LookupAddress[];
    try {
      addresses = await untilAborted(lookupHost(hostname), signal);
    } catch (err) {
      if (signal.aborted) throw err;
      throw new Refused('dns_error', `cannot resolve ${hostname}: ${String(err)}`);
    }
    if (addresses.length === 0) throw new Refused('dns_error', `${hostname} has no addresses`);
    // Any blocked address refuses the whole name: connecting to "the public one" would leave the
    // choice to whoever controls the DNS answer order.
    if (!allowPrivate && addresses.some((a) => isBlockedAddress(a.address))) {
      throw new Refused('blocked_destination', `${hostname} resolves to a blocked address`);
    }
    return addresses;
  }

  async function attempt(req: AttemptRequest): Promise<AttemptOutcome> {
    if (closed) throw new Error('attempter is closed');
    const started = performance.now();
    // One deadline for everything: resolution, connection, request, response and the body read.
    // A timer cleared when the attempt ends (and, like AbortSignal.timeout()'s, never keeping the
    // process alive): AbortSignal.timeout()'s outlives the attempt by up to its timeout, with the
    // signal, a WeakRef and a finalization entry, all promoted to the old generation meanwhile.
    const deadline = new AbortController();
    const signal = deadline.signal;
    const timeUp = () => deadline.abort(new DOMException('The operation was aborted due to timeout', 'TimeoutError'));
    // An attempt dispatched while every connection of its pool to the origin is in use waits in
    // undici's queue for one of ours: that wait is the worker's, not the receiver's, so the
    // deadline stops for it and goes on, with what was left, once the request is on a connection
    // (onRequestStart). Counted, a healthy receiver answering in 1.5 s of a 4 s timeout got
    // timeouts unsent under a backlog of one origin (3 workers × 64 connections against 965
    // deliveries in flight: 596 attempts never reached it, its circuit opened 11 times; a probe
    // of three workers). `limitMs` (the lease) bounds the whole. One timer: when it comes due
    // after such a wait, it is set again for the rest.
    let queuedAt: number | undefined;
    let queuedMs = 0;
    let origin: string | undefined;
    /** The time spent waiting for a connection of ours, up to `now`. */
    const waited = (now: number) => queuedMs + (queuedAt === undefined ? 0 : now - queuedAt);
    const onTimer = () => {
      const now = performance.now();
      const due = Math.min(started + req.timeoutMs + waited(now), started + Math.max(req.timeoutMs, req.limitMs ?? 0));
      if (now >= due - 1) return timeUp();
      timer = setTimeout(onTimer, due - now);
      timer.unref();
    };
    let timer = setTimeout(onTimer, req.timeoutMs);
    timer.unref();
    let statusCode: number | null = null;
    let retryAfterSeconds: number | null = null;
    let responseBody = '';
    let unpin = () => {};
    let tenantAgent: TenantAgent | undefined;

    const finish = (error: AttemptError | null): AttemptOutcome => {
      const now = performance.now();
      return { success: error === null, statusCode, responseBody, latencyMs: Math.round(now - started - waited(now)), error, retryAfterSeconds };
    };

    try {
      const check = checkDestinationUrl(req.url, req.allowPrivate);
      if (!check.ok) return finish('blocked_destination');
      const url = check.url;
      const hostname = url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
      tenantAgent = agentFor(req.allowPrivate, req.tenant);
      tenantAgent.active += 1;
      const { agent, pins } = tenantAgent;
      // IP literals were judged by checkDestinationUrl; names are resolved and judged here.
      if (isIP(hostname) === 0) unpin = pins.pin(url.hostname, await resolve(url.hostname, req.allowPrivate, signal));

      origin = url.origin;
      const sending = tenantAgent.sending.get(origin) ?? 0;
      tenantAgent.sending.set(origin, sending + 1);
      if (options.connections !== undefined && sending >= options.connections) queuedAt = performance.now();
      const onSocket = () => {
        if (queuedAt !== undefined) {
          queuedMs += performance.now() - queuedAt;
          queuedAt = undefined;
        }
        return req.stillWanted?.() ?? true;
      };
      // The status is kept once the answer starts: an answer cut off in its body records it too.
      responseBody = await post(agent, { origin: url.origin, path: `${url.pathname}${url.search}`, headers: req.headers, body: req.body }, signal, onSocket,
        (code, retryAfter) => {
          statusCode = code;
          if (code === 429 || code === 503) retryAfterSeconds = parseRetryAfter(retryAfter);
        },
        (partial) => { responseBody = partial; });
      return finish(statusCode !== null && statusCode >= 200 && statusCode < 300 ? null : 'http_status');
    } catch (err) {
      // Closed while it ran (close() aborts what is still open): an end of ours, not a bug.
      if (err instanceof Withdrawn) throw err;
      const error = closed ? 'connection_error' : classify(err, signal.aborted);
      if (error === null) throw err;
      return finish(error);
    } finally {
      clearTimeout(timer);
      unpin();
      if (tenantAgent && origin !== undefined) {
        const left = (tenantAgent.sending.get(origin) ?? 1) - 1;
        if (left > 0) tenantAgent.sending.set(origin, left);
        else tenantAgent.sending.delete(origin);
      }
      if (tenantAgent) {
        tenantAgent.active -= 1;
        tenantAgent.lastUsed = performance.now();
      }
    }
  }

  return {
    attempt,
    agentCount: () => agents.size,
    renewSharedPools() { sharedGeneration += 1; },
    async close() {
      closed = true;
      clearInterval(sweep);
      // Destroyed, not closed: a graceful close waited for requests still open, and the worker
      // closes the attempter only after giving up on its attempts (delivery-loop.ts), so a
      // receiver that hangs held a stopping worker for up to its timeout (120 s), far past
      // SHUTDOWN_TIMEOUT_MS. Those requests end now as aborted, and nobody records them.
      await Promise.all([...agents.values()].map(({ agent }) => agent.destroy()));
      agents.clear();
    },
  };
}

/**
 * One POST through `agent`: `onStatus` gets the answer's status and Retry-After when it starts,
 * and the promise the first RESPONSE_BODY_LIMIT bytes of its body as UTF-8 text (a character cut
 * at the limit is dropped whole); when the exchange fails after part of the body came,
 * `onPartial` gets that part the same way first (an answer cut off or stalled keeps what it
 * said). Reading stops at the limit and the exchange is aborted there
 * (its connection closed), so a huge answer is neither read nor buffered. Rejects with undici's
 * error, or with the signal's reason as soon as it aborts.
 *
 * undici's dispatch() with a handler of our own rather than its request(), which wraps every
 * answer in a Readable stream (with an async resource and an abort listener) that the worker then
 * read through an async iterator: with the handler, the worker's CPU per delivery in a drain fell
 * from 458-589 µs to 387-423 (bench/delivery-ab.ts, 4 rounds).
 */
function post(
  agent: Agent, options: { origin: string; path: string; headers: Record<string, string>; body: string }, signal: AbortSignal,
  onSocket: () => boolean,
  onStatus: (statusCode: number, retryAfter: string | undefined) => void,
  onPartial: (body: string) => void,
): Promise<string> {
  return new Promise<string>((resolve, reject) => {
    if (signal.aborted) return reject(signal.reason);
    let controller: Dispatcher.DispatchController | undefined;
    // The answer's bytes so far: the first chunk itself, then a copy that grows (to the limit at
    // most). Not a list of the chunks: an answer dripped a byte at a time kept one Buffer per
    // byte until its timeout, and 600 such attempts took the worker's heap past its limit in 90
    // s (a probe of a running service: the worker ended, out of memory).
    let body: Buffer = Buffer.alloc(0);
    let size = 0;
    let settled = false;
    const onAbort = () => {
      controller?.abort(signal.reason); // without a connection yet: at onRequestStart
      fail(signal.reason);
    };
    const end = () => {
      if (settled) return false;
      settled = true;
      signal.removeEventListener('abort', onAbort);
      return true;
    };
    // `stream: true` holds back an incomplete trailing sequence, and nothing flushes it.
    const text = () => new TextDecoder('utf-8').decode(body.subarray(0, size), { stream: true });
    const fail = (error: unknown) => {
      if (!end()) return;
      if (size > 0) onPartial(text());
      reject(error);
    };
    const succeed = () => {
      if (end()) resolve(text());
    };
    signal.addEventListener('abort', onAbort, { once: true });
    agent.dispatch({ ...options, method: 'POST' }, {
      onRequestStart(started) {
        controller = started;
        if (!onSocket()) started.abort(new Withdrawn());
        else if (signal.aborted) started.abort(signal.reason);
      },
      onResponseStart(_started, code, headers) {
        if (code >= 200) onStatus(code, headerValue(headers['retry-after'])); // 1xx: the answer follows
      },
      onResponseData(started, chunk) {
        if (settled) return;
        const take = Math.min(chunk.length, RESPONSE_BODY_LIMIT - size);
        if (size === 0) {
          body = chunk.subarray(0, take);
        } else {
          if (size + take > body.length) {
            const grown = Buffer.allocUnsafe(Math.min(RESPONSE_BODY_LIMIT, Math.max(256, 2 * (size + take))));
            body.copy(grown, 0, 0, size);
            body = grown;
          }
          chunk.copy(body, size, 0, take);
        }
        size += take;
        if (size < RESPONSE_BODY_LIMIT) return;
        succeed();
        started.abort(new Error('the answer was read up to its limit'));
      },
      onResponseEnd: succeed,
      onResponseError: (_started, error) => fail(error),
    });
  });
}
