// The benchmark's webhook receiver, in a process of its own: answers 200 at once and
// reports, on request over IPC, how many requests it has seen and when.
import http from 'node:http';
import type { AddressInfo } from 'node:net';

let count = 0;
let first = 0;
let last = 0;
const server = http.createServer({ keepAliveTimeout: 60_000 }, (req, res) => {
  req.resume();
  req.on('end', () => {
    const now = Date.now();
    if (count === 0) first = now;
    count += 1;
    last = now;
    res.writeHead(200, { 'content-type': 'text/plain' }).end('ok');
  });
});
server.listen(0, '127.0.0.1', () => process.send?.({ port: (server.address() as AddressInfo).port }));
process.on('message', (message: string) => {
  if (message === 'stats') process.send?.({ count, first, last });
  if (message === 'reset') count = first = last = 0;
  if (message === 'stop') server.close(() => process.exit(0));
});
