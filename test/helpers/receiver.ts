// A recording receiver: a real HTTP server on an ephemeral loopback port that keeps every
// request it gets (arrival time, headers, raw body) and answers as the test says.
import test from 'ava';
import { readFileSync } from 'node:fs';
import http from 'node:http';
import net, { type AddressInfo } from 'node:net';

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

/**
 * Starts a receiver; it closes when the test file ends, or earlier through `close()`.
 * `maxHeaderSize`: Node's limit on a request's headers (16 KB by default; past it, a 431).
 */
export async function startReceiver(reply: Reply = ok, options: { maxHeaderSize?: number } = {}): Promise<Receiver> {
  const server = http.createServer({ ...(options.maxHeaderSize ? { maxHeaderSize: options.maxHeaderSize } : {}) }, (req, res) => {
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

/**
 * A loopback port free to listen on (bound, then closed). Not for "nobody listens here": any
 * listen(0) of another test may be given it next (refusedPort).
 */
export async function closedPort(): Promise<number> {
  const server = http.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/** The lowest port the kernel hands out to listen(0) and outgoing connections. */
function ephemeralLow(): number {
  try {
    return Number(readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0]) || 32_768;
  } catch {
    return 32_768;
  }
}

/** Whether a connection to this loopback port is refused (nothing listens on it). */
function refused(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1');
    socket.once('connect', () => { socket.destroy(); resolve(false); });
    socket.once('error', (error: NodeJS.ErrnoException) => resolve(error.code === 'ECONNREFUSED'));
  });
}

/**
 * A loopback port that refuses connections for as long as the test runs: below the kernel's
 * ephemeral range, where no test's listen(0) is ever given a port, and refused when checked. A
 * port taken by closedPort() was once handed to another test's receiver a moment later, which
 * then got the "closed port" test's attempts (a 500 where a connection error was expected).
 */
export async function refusedPort(): Promise<number> {
  const high = ephemeralLow() - 1;
  for (let tries = 0; tries < 50; tries += 1) {
    const port = 10_000 + Math.floor(Math.random() * (high - 10_000));
    if (await refused(port)) return port;
  }
  throw new Error('no refused loopback port found below the ephemeral range');
}
