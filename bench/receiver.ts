// The benchmark's webhook receiver, in a process of its own: answers 200 at once and
// reports, on request over IPC, how many requests it has seen and when. While tracking is on
// ('track'), it also keeps the first arrival time of each webhook-id (latency phase).
import http from 'node:http';
import type { AddressInfo } from 'node:net';

let count = 0;
let first = 0;
let last = 0;
let tracking = false;
let arrivals = new Map<string, number>();
const server = http.createServer({ keepAliveTimeout: 60_000 }, (req, res) => {
  req.resume();
  req.on('end', () => {
    const now = Date.now();
    if (count === 0) first = now;
    count += 1;
    last = now;
    const id = req.headers['webhook-id'];
    if (tracking && typeof id === 'string' && !arrivals.has(id)) arrivals.set(id, now);
    res.writeHead(200, { 'content-type': 'text/plain' }).end('ok');
  });
});
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
