// Wakes the delivery loop when deliveries become due: LISTEN hookline_deliveries (notified at
// commit by sql/021-wakeup.sql) on a connection of its own, to the database itself
// (DATABASE_DIRECT_URL when set: LISTEN is session state, which a transaction pooler does not
// keep) and to the primary of a multi-host URL. The loop's poll stays the fallback: while the
// connection is lost (an outage, a failover) it is reopened every RECONNECT_MS, and once back
// the loop is woken, for whatever was notified meanwhile.
//
// Notifications are coalesced: any number of them between two fetches wake the loop once.
//
// A LISTEN that succeeds need not hear anything: through a transaction pooler (DATABASE_URL
// to PgBouncer, DATABASE_DIRECT_URL unset) it lands on a server connection the pooler hands to
// others. So once listening, the worker sends itself a notification from its pool (`probe`): a
// connection that hears one, that or any other, is `hearing`, and only then does the loop stretch
// its idle poll (WORKER_IDLE_POLL_INTERVAL_MS). A deaf one keeps the loop at
// WORKER_POLL_INTERVAL_MS, as before there was a LISTEN.
//
// The same connection listens on hookline_endpoints_stopped (sql/021-wakeup.sql): an endpoint
// paused, disabled or deleted. The loop asks stoppedSince() before each send it claimed ahead of
// its rate-limit slot, and hands back those whose endpoint stopped after their claim began.
import pg from 'pg';
import type { Logger } from '../logger.ts';
import { primaryUrl } from '../db/multi-host.ts';

export const WAKEUP_CHANNEL = 'hookline_deliveries';
export const STOPPED_CHANNEL = 'hookline_endpoints_stopped';
/**
 * How long a stop is remembered: as long as a claimed send can wait before it is sent (for its
 * slot, then for a connection behind hanging requests: up to its lease, at most an hour).
 */
const STOPPED_KEPT_MS = 3_600_000;
const RECONNECT_MS = 1000;
/** A quiet connection is checked this often, so a half-open one (a vanished host) is replaced. */
const HEARTBEAT_MS = 30_000;
const TIMEOUT_MS = 5000;

export type Wakeup = {
  /** Call before a fetch: what was notified until now, that fetch will see. */
  arm(): void;
  /** Resolves after `ms`, or at once when notified since arm(), or when notified meanwhile. */
  wait(ms: number): Promise<void>;
  /** Ends any wait now (stopping). */
  interrupt(): void;
  readonly listening: boolean;
  /** Listening, and a notification was heard on this connection since it began to listen (the probe's, or any). */
  readonly hearing: boolean;
  /**
   * Whether a stop of the endpoint was notified at `since` (Date.now() ms) or later. A stop
   * committed while the listener is lost (an outage, a failover) or never listening (a
   * transaction pooler without DATABASE_DIRECT_URL) goes unheard: those sends go as claimed.
   */
  stoppedSince(endpointId: string, since: number): boolean;
  stop(): Promise<void>;
};

export function startWakeup(deps: {
  url: string | undefined; logger: Logger;
  /** Sends NOTIFY hookline_deliveries from another session (the worker's pool): proves the listening connection hears. */
  probe?: () => Promise<unknown>;
}): Wakeup {
  let notified = false;
  let heard = false;
  let waiter: (() => void) | undefined;
  let stopped = false;
  let client: pg.Client | undefined;
  let listening = false;
  let lostLogged = false;
  let retry: NodeJS.Timeout | undefined;
  let heartbeat: NodeJS.Timeout | undefined;
  /** When each endpoint was last notified stopped (Date.now()), for STOPPED_KEPT_MS. */
  const stoppedAt = new Map<string, number>();
  let prunedAt = Date.now();
  const endpointStopped = (id: string) => {
    const now = Date.now();
    stoppedAt.delete(id); // insertion order stays the order of the stops
    stoppedAt.set(id, now);
    if (now - prunedAt < STOPPED_KEPT_MS / 6) return;
    prunedAt = now;
    for (const [key, at] of stoppedAt) {
      if (now - at < STOPPED_KEPT_MS) break;
      stoppedAt.delete(key);
    }
  };

  /** Ends the current wait, if any. */
  const release = () => {
    const resolve = waiter;
    waiter = undefined;
    resolve?.();
  };
  const wake = () => {
    notified = true;
    release();
  };

  /** Logged once per outage; the connection is tried again every RECONNECT_MS. */
  const reconnectLater = (error: unknown) => {
    if (!lostLogged) deps.logger.info({ err: error }, 'wakeup listener lost: polling until it is back');
    lostLogged = true;
    retry = setTimeout(() => void connect(), RECONNECT_MS);
  };

  const lost = (current: pg.Client, error?: unknown) => {
    if (client !== current) return; // an older connection's late event
    client = undefined;
    listening = false;
    heard = false;
    clearInterval(heartbeat);
    void current.end().catch(() => {});
    if (!stopped) reconnectLater(error);
  };

  async function connect(): Promise<void> {
    if (stopped || !deps.url) return;
    let current: pg.Client | undefined;
    try {
      current = new pg.Client({
        connectionString: await primaryUrl(deps.url, TIMEOUT_MS), application_name: 'hookline-wakeup',
        connectionTimeoutMillis: TIMEOUT_MS, query_timeout: TIMEOUT_MS, keepAlive: true,
      });
      client = current;
      current.on('error', (error) => lost(current!, error));
      current.on('end', () => lost(current!));
      current.on('notification', (message) => {
        if (client === current && listening) heard = true;
        if (message.channel === WAKEUP_CHANNEL) wake();
        else if (message.channel === STOPPED_CHANNEL && message.payload) endpointStopped(message.payload);
      });
      await current.connect();
      await current.query(`listen ${WAKEUP_CHANNEL}; listen ${STOPPED_CHANNEL}`);
      if (stopped || client !== current) return void current.end().catch(() => {});
      listening = true;
      if (lostLogged) deps.logger.info('wakeup listener back');
      lostLogged = false;
      heartbeat = setInterval(() => void current!.query('select 1').catch((error: unknown) => lost(current!, error)), HEARTBEAT_MS);
      heartbeat.unref();
      wake(); // notifications sent while it was not listening are lost: look once
      deps.probe?.().catch((error: unknown) => deps.logger.debug({ err: error }, 'wakeup probe not sent: the idle poll stays short until a notification is heard'));
    } catch (error) {
      if (current) lost(current, error);
      else if (!stopped) reconnectLater(error);
    }
  }
  void connect();

  return {
    arm() { notified = false; },
    wait(ms) {
      if (notified || stopped) return Promise.resolve();
      return new Promise<void>((resolve) => {
        const timer = setTimeout(() => {
          if (waiter === done) waiter = undefined;
          resolve();
        }, ms);
        const done = () => {
          clearTimeout(timer);
          resolve();
        };
        waiter = done;
      });
    },
    interrupt: release,
    get listening() { return listening; },
    get hearing() { return listening && heard; },
    stoppedSince(endpointId, since) {
      return (stoppedAt.get(endpointId) ?? Number.NEGATIVE_INFINITY) >= since;
    },
    async stop() {
      stopped = true;
      clearTimeout(retry);
      clearInterval(heartbeat);
      const current = client;
      client = undefined;
      listening = false;
      heard = false;
      release();
      await current?.end().catch(() => {});
    },
  };
}
