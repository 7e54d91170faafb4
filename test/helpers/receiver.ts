// A recording receiver: a real HTTP server on an ephemeral loopback port that keeps every
// request it gets (arrival time, headers, raw body) and answers as the test says.
import test from 'ava';
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export type Arrival = {
  /** Epoch ms when the request arrived (before its body was read). */
  at: number;
  method: string;
  /** Path and query, as sent. */
  url: string;
  headers: http.IncomingHttpHeaders;
  rawHeaders: string[];
  body: Buffer;
  remotePort: number;
};

/** How a request is answered; 'hang' leaves it open (until the client gives up or the receiver closes). */
export type Answer = { status: number; body?: string | Buffer; headers?: Record<string, string> } | 'hang';

/**
 * Decides the answer to a request (`index`: 0-based arrival number). A promise holds the
 * request open until it settles. Returning nothing means the function answered (or broke)
 * the exchange itself through `exchange.res` / `exchange.req`.
 */
export type Reply = (
  arrival: Arrival,
  index: number,
  exchange: { req: http.IncomingMessage; res: http.ServerResponse },
) => Answer | Promise<Answer> | void;

export type Receiver = {
  /** http://127.0.0.1:<port>, no path: `at(path)` adds one. */
  url: string;
  port: number;
  at(path: string): string;
  arrivals: Arrival[];
  /** TCP connections accepted, whether or not a request followed. */
  connections: number;
  /** How requests are answered; may be replaced during a test. */
  reply: Reply;
  /** Arrivals whose webhook-id header is `jobId`. */
  forJob(jobId: string): Arrival[];
  close(): Promise<void>;
};

export const ok: Reply = () => ({ status: 200, body: 'ok' });

/** Every header named `name` (any case) with its value, from the raw header list. */
export function rawHeader(arrival: Arrival, name: string): string[] {
  const values: string[] = [];
  for (let i = 0; i < arrival.rawHeaders.length; i += 2) {
    if (arrival.rawHeaders[i]!.toLowerCase() === name.toLowerCase()) values.push(arrival.rawHeaders[i + 1]!);
  }
  return values;
}

const open = new Set<Receiver>();
test.after.always(async () => {
  await Promise.all([...open].map((r) => r.close()));
});

/** Starts a receiver; it closes when the test file ends, or earlier through `close()`. */
export async function startReceiver(reply: Reply = ok): Promise<Receiver> {
  const server = http.createServer((req, res) => {
    const at = Date.now();
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('error', () => {});
    res.on('error', () => {});
    req.on('end', () => {
      const arrival: Arrival = {
        at, method: req.method ?? '', url: req.url ?? '', headers: req.headers, rawHeaders: req.rawHeaders,
        body: Buffer.concat(chunks), remotePort: req.socket.remotePort ?? 0,
      };
      receiver.arrivals.push(arrival);
      const answer = receiver.reply(arrival, receiver.arrivals.length - 1, { req, res });
      if (answer === undefined) return;
      void Promise.resolve(answer).then((settled) => {
        if (settled === 'hang' || res.headersSent || res.destroyed) return;
        res.writeHead(settled.status, settled.headers ?? {});
        res.end(settled.body ?? '');
      }).catch((error: unknown) => {
        // A broken answer is the test's bug: say so, and do not leave the client waiting.
        console.error('the receiver could not answer:', error);
        res.destroy();
      });
    });
  });
  server.on('connection', () => { receiver.connections += 1; });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  let closed: Promise<void> | undefined;
  const receiver: Receiver = {
    url: `http://127.0.0.1:${port}`,
    port,
    at: (path) => `http://127.0.0.1:${port}${path}`,
    arrivals: [],
    connections: 0,
    reply,
    forJob: (jobId) => receiver.arrivals.filter((a) => a.headers['webhook-id'] === jobId),
    close: () => {
      closed ??= new Promise<void>((resolve) => {
        open.delete(receiver);
        server.closeAllConnections();
        server.close(() => resolve());
      });
      return closed;
    },
  };
  open.add(receiver);
  return receiver;
}

/** A loopback port nobody listens on (bound, then closed). */
export async function closedPort(): Promise<number> {
  const server = http.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}
