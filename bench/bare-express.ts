// The bench's "bare Express POST" ceiling, in a process of its own: Express 5 with
// express.json() (the same body limit as the API), answering each POST with a 201 and a small
// JSON body, no database. Issue 17 states the accept rate as a share of this, measured in the
// same run. Tells its port over IPC; 'stop' ends it.
import express from 'express';
import type { AddressInfo } from 'node:net';

const app = express();
app.use(express.json({ limit: '1mb' }));
let next = 0;
app.post('/v1/webhook-jobs', (req, res) => {
  const body = req.body as { application_id?: unknown; event_type?: unknown };
  next += 1;
  res.status(201).json({ id: `job_${next}`, application_id: body.application_id, event_type: body.event_type, status: 'created' });
});
const server = app.listen(0, '127.0.0.1', () => process.send?.({ port: (server.address() as AddressInfo).port }));
server.keepAliveTimeout = 60_000;
process.on('message', (message: string) => {
  if (message === 'stop') server.close(() => process.exit(0));
});
