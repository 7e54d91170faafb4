// What the benches send and where: the webhook payload of every job and delivery they make, and
// the receiver (bench/receiver.ts) in a process of its own. One definition, so the delivery floor
// (bench/delivery-floor.ts) POSTs the same bytes the bench's deliveries carry.
import { fork, type ChildProcess, type StdioOptions } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const PAYLOAD = { type: 'invoice.paid', data: { id: 'in_'.padEnd(40, 'x'), lines: Array.from({ length: 12 }, (_, i) => ({ sku: `sku-${i}`, qty: i, price: 1999 })) } };

/** Starts bench/receiver.ts and returns it once it listens, with its port. */
export async function startReceiver(stdio: StdioOptions): Promise<{ receiver: ChildProcess; port: number }> {
  const receiver = fork(path.join(path.dirname(fileURLToPath(import.meta.url)), 'receiver.ts'), { stdio });
  const { port } = await new Promise<{ port: number }>((resolve) => receiver.once('message', (m) => resolve(m as { port: number })));
  return { receiver, port };
}
