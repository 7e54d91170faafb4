// The web role: the API on an HTTP server that, when stopped, refuses new connections and
// lets in-flight requests finish (up to the shutdown timeout).
import { randomUUID } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Duplex } from 'node:stream';
import { makeApp, type AppDependencies } from './api/app.ts';
import { withBoundPort } from './config.ts';
import { stopValidationPool } from './core/json-schema-pool.ts';
import { AppError, validationError } from './errors.ts';

export type WebServer = { port: number; stop(): Promise<void> };

/**
 * What Node's HTTP parser rejects before the app sees a request (a malformed request line or
 * header, headers past 16 KB, a request not arrived whole within HTTP_REQUEST_TIMEOUT_MS) is
 * answered in the API's error shape, with an X-Request-Id, as every other client mistake is:
 * Node's own handler answered a bare 400, 431 or 408 with no body. The connection is closed.
 */
function answerClientError(error: Error & { code?: string }, socket: Duplex): void {
  // Nothing to answer on a reset or closed socket, or once a response has begun.
  const started = (socket as Duplex & { _httpMessage?: { headersSent?: boolean } })._httpMessage?.headersSent === true;
  if (error.code === 'ECONNRESET' || !socket.writable || started) {
    socket.destroy();
    return;
  }
  const problem = error.code === 'ERR_HTTP_REQUEST_TIMEOUT'
    ? new AppError(408, 'request_timeout', 'The request did not arrive whole in time.')
    : error.code === 'HPE_HEADER_OVERFLOW'
      ? new AppError(431, 'request_header_fields_too_large', 'The request\'s headers are larger than 16 KB.')
      : validationError('The request is not valid HTTP/1.1.', [{ path: 'request', message: 'is not valid HTTP/1.1' }]);
  const { status } = problem;
  const body = JSON.stringify(problem.toBody());
  socket.end(`HTTP/1.1 ${status} ${http.STATUS_CODES[status]}\r\nContent-Type: application/json; charset=utf-8\r\n`
    + `Content-Length: ${Buffer.byteLength(body)}\r\nX-Request-Id: ${randomUUID()}\r\nConnection: close\r\n\r\n${body}`);
}

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
  server.on('clientError', answerClientError);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(deps.config.port, () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  // The app is made once the port is known: without PUBLIC_URL its links name the port bound
  // (PORT=0 picks one). No request is missed: no socket is read between the listen and here.
  try {
    server.on('request', makeApp({ ...deps, config: withBoundPort(deps.config, port) }));
  } catch (error) {
    server.close();
    throw error;
  }
  deps.logger.info({ port }, 'web listening');
  return {
    port,
    stop: () => new Promise<void>((resolve) => {
      const force = setTimeout(() => server.closeAllConnections(), deps.config.shutdownTimeoutMs);
      server.close(() => {
        clearTimeout(force);
        void stopValidationPool().then(resolve, resolve);
      });
      server.closeIdleConnections();
    }),
  };
}
