// The web role: the API on an HTTP server that, when stopped, refuses new connections, answers
// every request from then on with `Connection: close` (so keep-alive clients move away) and lets
// in-flight requests finish (up to the shutdown timeout).
import { randomUUID } from 'node:crypto';
import http from 'node:http';
import net, { type AddressInfo } from 'node:net';
import type { Duplex } from 'node:stream';
import { makeApp, type AppDependencies } from './api/app.ts';
import { withBoundPort } from './config.ts';
import { holdValidationPool } from './core/json-schema-pool.ts';
import { AppError, validationError } from './errors.ts';
import { answeredByServer, recordRequest } from './api/middleware/request-context.ts';
import type { Logger } from './logger.ts';
import { makeMetrics, type Metrics } from './metrics.ts';

export type WebServer = { port: number; stop(): Promise<void> };

/**
 * After the shutdown timeout cut the connections still open, how long a stop waits more for the
 * handlers of the requests it cut to end (their clients are gone: their database work rolls back
 * at its next step), so that the pools are not closed under them.
 */
export const HANDLER_GRACE_MS = 5_000;

/** How long a stopping server leaves idle keep-alive connections open for a request already on its way. */
const IDLE_GRACE_MS = 1_000;

/**
 * What Node's HTTP parser rejects before the app sees a request (a malformed request line or
 * header, headers past 16 KB, a request not arrived whole within HTTP_REQUEST_TIMEOUT_MS) is
 * answered in the API's error shape, with an X-Request-Id, as every other client mistake is:
 * Node's own handler answered a bare 400, 431 or 408 with no body. The connection is closed.
 * Each such answer is logged and counted as every request is: a request the app had (its body
 * late) under its own line and X-Request-Id, with that status (answeredByServer); one whose
 * headers never arrived whole, with a new id, method and path "unknown" and route `unmatched`,
 * timed from the connection's start. Before, none had a line or a sample (a probe).
 */
function makeClientErrorAnswer(logger: Logger, metrics: Metrics) {
  return (error: Error & { code?: string }, socket: Duplex): void => {
    // Nothing to answer on a reset or closed socket, or once a response has begun.
    const current = (socket as Duplex & { _httpMessage?: http.ServerResponse | null })._httpMessage;
    if (error.code === 'ECONNRESET' || !socket.writable || current?.headersSent === true) {
      socket.destroy();
      return;
    }
    const problem = error.code === 'ERR_HTTP_REQUEST_TIMEOUT'
      ? new AppError(408, 'request_timeout', 'The request did not arrive whole in time.')
      : error.code === 'HPE_HEADER_OVERFLOW'
        ? new AppError(431, 'request_header_fields_too_large', 'The request\'s headers are larger than 16 KB.')
        : validationError('The request is not valid HTTP/1.1.', [{ path: 'request', message: 'is not valid HTTP/1.1' }]);
    const { status } = problem;
    // The app's request on this connection, if it has one: its line is written when it closes.
    let requestId = current ? answeredByServer(current, status) : undefined;
    if (requestId === undefined) {
      requestId = randomUUID();
      const since = (socket as Duplex & { [CONNECTED_AT]?: bigint })[CONNECTED_AT];
      recordRequest(logger, metrics, {
        requestId, method: 'unknown', path: 'unknown', route: 'unmatched', status, orgId: null,
        seconds: since === undefined ? 0 : Number(process.hrtime.bigint() - since) / 1e9,
      });
    }
    const body = JSON.stringify(problem.toBody());
    socket.end(`HTTP/1.1 ${status} ${http.STATUS_CODES[status]}\r\nContent-Type: application/json; charset=utf-8\r\n`
      // Cache-Control as on every /v1 answer (a probe of the contract found it missing here).
      + `Content-Length: ${Buffer.byteLength(body)}\r\nX-Request-Id: ${requestId}\r\nX-Content-Type-Options: nosniff\r\n`
      + `Cache-Control: no-store\r\nConnection: close\r\n\r\n${body}`);
  };
}

/** When a connection opened (process.hrtime): the start of a request the server answers before reading its headers. */
const CONNECTED_AT = Symbol('connected at');

export async function startWeb(deps: AppDependencies): Promise<WebServer> {
  // A request must arrive whole within HTTP_REQUEST_TIMEOUT_MS (Node's default is 300 s): a
  // client that sends less body than its Content-Length, or drips it, held a socket that long,
  // and enough of them hold every socket the process may open. Node answers 408 and closes;
  // it checks open connections every few seconds. Answering takes as long as it takes.
  const requestTimeout = deps.config.httpRequestTimeoutMs;
  const server = http.createServer({
    // An HTTP/1.1 request without Host is refused by the app (src/api/app.ts), in the API's
    // error shape: Node's own check answered a bare 400 before it.
    requireHostHeader: false,
    keepAliveTimeout: 5_000,
    requestTimeout,
    headersTimeout: Math.min(requestTimeout, 60_000),
    connectionsCheckingInterval: Math.min(5_000, Math.ceil(requestTimeout / 4)),
  });
  // One registry for the app and the answers the server gives itself (the app's own when none is given).
  const metrics = deps.metrics ?? makeMetrics({ pool: deps.pool, logger: deps.logger, queue: deps.queue });
  server.on('clientError', makeClientErrorAnswer(deps.logger, metrics));
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(deps.config.port, () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  // The schema validation threads are the process's; this server lets them go at its stop.
  const releaseValidationPool = holdValidationPool();
  // At a stop, the requests being handled are marked `Connection: close`, and their handlers
  // are waited for (res.end) before the pools behind them may close. They are found through the
  // open connections (each one's current response), which are followed as they open and close:
  // a listener on every response, on the hot path of job creation, took the web from 375-378 to
  // 461 µs of CPU per accepted job at the medians of 4 interleaved rounds (bench/accept-ab.ts;
  // wrapping every response's `end`, as the stop first did, cost as much: docs/performance.md).
  const sockets = new Set<Duplex>();
  server.on('connection', (socket: Duplex) => {
    (socket as Duplex & { [CONNECTED_AT]?: bigint })[CONNECTED_AT] = process.hrtime.bigint();
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
  });
  const handling = new Set<http.ServerResponse>();
  let handlersDone: (() => void) | undefined;
  /** A response whose handler a stop waits for: its res.end is followed. */
  const follow = (res: http.ServerResponse) => {
    handling.add(res);
    const end = res.end;
    res.end = function (this: http.ServerResponse, ...args: Parameters<typeof end>) {
      if (handling.delete(res) && handling.size === 0) handlersDone?.();
      return end.apply(this, args);
    } as typeof end;
  };
  /** From the stop on: Connection: close on this response, and its handler waited for. */
  const closing = (res: http.ServerResponse) => {
    if (!res.headersSent) res.setHeader('Connection', 'close');
    if (!res.writableEnded && !handling.has(res)) follow(res);
  };
  // The app is made once the port is known: without PUBLIC_URL its links name the port bound
  // (PORT=0 picks one). No request is missed: no socket is read between the listen and here.
  try {
    server.on('request', makeApp({ ...deps, metrics, config: withBoundPort(deps.config, port) }));
    // An Expect other than 100-continue: Node answered 417 itself, empty, without the API's
    // error body or X-Request-Id (a probe). The expectation is ignored (RFC 9110 allows either)
    // and the request served as any other.
    server.on('checkExpectation', (req: http.IncomingMessage, res: http.ServerResponse) => server.emit('request', req, res));
  } catch (error) {
    server.close();
    throw error;
  }
  deps.logger.info({ port }, 'web listening');
  let stopped: Promise<void> | undefined;
  const stop = async () => {
    // A stopping server answers every request with Connection: close, the in-flight ones too:
    // Node's close() only refuses new connections, and keep-alive clients that kept sending
    // requests on theirs were answered for the whole shutdown timeout, then cut mid-request.
    server.prependListener('request', (_req: http.IncomingMessage, res: http.ServerResponse) => closing(res));
    for (const socket of sockets) {
      const res = (socket as Duplex & { _httpMessage?: http.ServerResponse | null })._httpMessage;
      if (res) closing(res);
    }
    let forced = false;
    await new Promise<void>((resolve) => {
      const force = setTimeout(() => {
        forced = true;
        server.closeAllConnections();
      }, deps.config.shutdownTimeoutMs);
      // No new connections from here. http.Server's own close() would also close the idle
      // keep-alive connections at once, and a busy client's next request, already on its way,
      // met a reset (it never reached the app, but the client cannot know): net.Server's close
      // stops listening alone, those requests are answered Connection: close, and the
      // connections still idle a moment later are closed then.
      net.Server.prototype.close.call(server, () => {
        clearTimeout(force);
        clearTimeout(idle);
        resolve();
      });
      const idle = setTimeout(() => server.closeIdleConnections(), IDLE_GRACE_MS);
    });
    // The connections are closed: every request answered, unless the timeout cut some. Their
    // handlers may still be running; the pools close after this, so give them a moment.
    if (handling.size > 0) {
      const left = await new Promise<number>((resolve) => {
        const timer = setTimeout(() => resolve(handling.size), HANDLER_GRACE_MS);
        handlersDone = () => {
          clearTimeout(timer);
          resolve(0);
        };
      });
      if (left > 0) deps.logger.warn({ requests: left }, 'requests still being handled after the shutdown timeout: stopping anyway');
    }
    if (forced) deps.logger.warn({ shutdown_timeout_ms: deps.config.shutdownTimeoutMs }, 'connections still open at the shutdown timeout were closed');
    await releaseValidationPool().catch(() => {});
  };
  return {
    port,
    stop: () => (stopped ??= stop()),
  };
}
