// The web role: the API on an HTTP server that, when stopped, refuses new connections and
// lets in-flight requests finish (up to the shutdown timeout).
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { makeApp, type AppDependencies } from './api/app.ts';
import { stopValidationPool } from './core/json-schema-pool.ts';

export type WebServer = { port: number; stop(): Promise<void> };

export async function startWeb(deps: AppDependencies): Promise<WebServer> {
  // A request must arrive whole within HTTP_REQUEST_TIMEOUT_MS (Node's default is 300 s): a
  // client that sends less body than its Content-Length, or drips it, held a socket that long,
  // and enough of them hold every socket the process may open. Node answers 408 and closes;
  // it checks open connections every few seconds. Answering takes as long as it takes.
  const requestTimeout = deps.config.httpRequestTimeoutMs;
  const server = http.createServer({
    keepAliveTimeout: 5_000,
    requestTimeout,
    headersTimeout: Math.min(requestTimeout, 60_000),
    connectionsCheckingInterval: Math.min(5_000, Math.ceil(requestTimeout / 4)),
  }, makeApp(deps));
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(deps.config.port, () => resolve());
  });
  const { port } = server.address() as AddressInfo;
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
