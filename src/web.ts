// The web role: the API on an HTTP server that, when stopped, refuses new connections and
// lets in-flight requests finish (up to the shutdown timeout).
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { makeApp, type AppDependencies } from './api/app.ts';
import { stopValidationPool } from './core/json-schema-pool.ts';

export type WebServer = { port: number; stop(): Promise<void> };

export async function startWeb(deps: AppDependencies): Promise<WebServer> {
  const server = http.createServer({ keepAliveTimeout: 5_000 }, makeApp(deps));
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
