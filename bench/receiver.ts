// The benchmark's webhook receiver, in a process of its own: answers 200 at once and
// reports, on request over IPC, how many requests it has seen and when. While tracking is on
// ('track'), it also keeps the first arrival time of each webhook-id (latency phase).
// Paths /b/<kind>/... misbehave as the lock probe's endpoints do (bench/lock-probe.ts): `fail`
// answers 500, `slow` 200 after 1.5 s (past the probe's 1 s endpoint timeout), `429` with
// Retry-After: 1, `410` Gone, and `flip-<s>` 200 and 500 by turns of <s> seconds, so that
// circuits open and close all through a run; `every-<n>` 200 to every n-th request of its path
// and 500 to the others, so that most attempts fail and, with n at most the circuit breaker's
// threshold, its endpoint is never disabled (a tenant whose retries are most of its traffic).
// Any other path answers 200 at once.
import http from 'node:http';
import type { AddressInfo } from 'node:net';

let count = 0;
let first = 0;
let last = 0;
let tracking = false;
let arrivals = new Map<string, number>();
/** Requests seen per path, for `every-<n>`. */
const seen = new Map<string, number>();
const server = http.createServer({ keepAliveTimeout: 60_000 }, (req, res) => {
  req.resume();
  req.on('end', () => {
    const now = Date.now();
    if (count === 0) first = now;
    count += 1;
    last = now;
    const id = req.headers['webhook-id'];
    if (tracking && typeof id === 'string' && !arrivals.has(id)) arrivals.set(id, now);
    if (req.url?.startsWith('/b/')) return misbehave(req.url.split('/')[2] ?? '', req.url, res, now);
    res.writeHead(200, { 'content-type': 'text/plain' }).end('ok');
  });
});

function misbehave(kind: string, url: string, res: http.ServerResponse, now: number): void {
  const answer = (code: number, headers: Record<string, string> = {}) => {
    res.writeHead(code, { 'content-type': 'text/plain', ...headers }).end(String(code));
  };
  if (kind === 'fail') return answer(500);
  if (kind === '429') return answer(429, { 'retry-after': '1' });
  if (kind === '410') return answer(410);
  if (kind === 'slow') return void setTimeout(() => { if (!res.destroyed) answer(200); }, 1500);
  const every = /^every-(\d+)$/.exec(kind)?.[1];
  if (every) {
    const n = (seen.get(url) ?? 0) + 1;
    seen.set(url, n);
    return answer(n % Number(every) === 0 ? 200 : 500);
  }
  const period = /^flip-(\d+)$/.exec(kind)?.[1];
  answer(period && Math.floor(now / 1000 / Number(period)) % 2 === 1 ? 500 : 200);
}

server.listen(0, '127.0.0.1', () => process.send?.({ port: (server.address() as AddressInfo).port }));
process.on('message', (message: string) => {
  if (message === 'stats') process.send?.({ count, first, last });
  if (message === 'reset') count = first = last = 0;
  if (message === 'track') {
    tracking = true;
    arrivals = new Map();
  }
  if (message === 'arrivals') {
    tracking = false;
    process.send?.({ arrivals: [...arrivals] });
  }
  if (message === 'stop') server.close(() => process.exit(0));
});
