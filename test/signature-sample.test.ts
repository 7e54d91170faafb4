// The signature verifier of docs/api.md (section 8), run as a reader would copy it: its code
// block is taken from the document as written and imported as a module, then given real
// deliveries from the real worker to a receiver on 127.0.0.1. It must accept them (one
// signature, and the two of a rotation's grace period with either secret) and refuse a tampered
// body, a wrong secret, the hex decoding of the secret, and a correctly signed old timestamp.
import test from 'ava';
import { createHmac } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { signatureHeader } from '../src/worker/signing.ts';
import { startTestApp } from './helpers/app.ts';
import { createApplication, createEndpoint, createEventType, createJob } from './helpers/fixtures.ts';
import { startReceiver, type Arrival } from './helpers/receiver.ts';
import { until } from './helpers/until.ts';

const app = startTestApp({ ALLOW_PRIVATE_DESTINATIONS: 'true' }, { worker: true });

type Verify = (secret: string, headers: Record<string, unknown>, body: Buffer | string, toleranceSeconds?: number) => boolean;

/** The one ```js block of docs/api.md that defines verifyWebhook, without the list's indentation. */
async function sampleCode(): Promise<string> {
  const markdown = await readFile(new URL('../docs/api.md', import.meta.url), 'utf8');
  const blocks = [...markdown.matchAll(/^( *)```js\n([\s\S]*?)^\1```$/gm)]
    .map(([, indent, body]) => body!.split('\n').map((line) => line.slice(indent!.length)).join('\n'))
    .filter((code) => code.includes('function verifyWebhook'));
  if (blocks.length !== 1) throw new Error(`docs/api.md has ${blocks.length} js blocks defining verifyWebhook, not one`);
  return blocks[0]!;
}

const sample = (async () => {
  const module = await import(`data:text/javascript,${encodeURIComponent(await sampleCode())}`);
  return module.verifyWebhook as Verify;
})();

/** An organization whose one endpoint is a local receiver; a job to it, and what arrived. */
async function delivered(t: import('ava').ExecutionContext) {
  const receiver = await startReceiver();
  const { key } = await app.createOrg();
  const by = { on: app, key, t };
  const appId = (await createApplication(by, { name: 'Signed' })).id as string;
  await createEventType(by, 'invoice.paid');
  const endpoint = await createEndpoint(by, { application_id: appId, url: receiver.at('/hooks'), event_types: ['invoice.paid'] });
  const send = async (eventId: string): Promise<Arrival> => {
    const job = await createJob(by, { application_id: appId, event_type: 'invoice.paid', event_id: eventId, payload: { invoice_id: 'in_1', amount: 4200, note: 'é ✓' } });
    return until(`the delivery of ${job.id}`, () => receiver.forJob(job.id)[0]);
  };
  return { key, endpoint: endpoint as { id: string; secret: string }, send };
}

test('the docs\' verifier accepts a real delivery and refuses a tampered one', async (t) => {
  const verifyWebhook = await sample;
  const { endpoint, send } = await delivered(t);
  t.regex(endpoint.secret, /^whsec_[0-9a-f]{64}$/, 'the secret looks as the docs say');
  const arrival = await send('inv-1');
  const headers = arrival.headers as Record<string, unknown>;
  t.regex(String(headers['webhook-signature']), /^v1,[A-Za-z0-9+/]+=*$/);

  t.true(verifyWebhook(endpoint.secret, headers, arrival.body), 'the raw body as a Buffer');
  t.true(verifyWebhook(endpoint.secret, headers, arrival.body.toString('utf8')), 'the raw body as a string');

  const tampered = Buffer.from(arrival.body.toString('utf8').replace('4200', '4201'));
  t.notDeepEqual(tampered, arrival.body);
  t.false(verifyWebhook(endpoint.secret, headers, tampered), 'a changed amount');
  t.false(verifyWebhook(endpoint.secret, headers, Buffer.concat([arrival.body, Buffer.from(' ')])), 'a byte added');
  t.false(verifyWebhook(endpoint.secret, { ...headers, 'webhook-id': 'job_other' }, arrival.body), 'another webhook-id');
  t.false(verifyWebhook(`whsec_${'0'.repeat(64)}`, headers, arrival.body), 'another secret');
  t.false(verifyWebhook(endpoint.secret, { ...headers, 'webhook-signature': undefined }, arrival.body), 'no signature');

  // The newcomer's mistake the docs warn against: the 64 characters decoded as hex.
  const hexKey = Buffer.from(endpoint.secret.slice('whsec_'.length), 'hex');
  const content = `${headers['webhook-id']}.${headers['webhook-timestamp']}.${arrival.body.toString('utf8')}`;
  const hexSignature = `v1,${createHmac('sha256', hexKey).update(content).digest('base64')}`;
  t.not(hexSignature, headers['webhook-signature'], 'a hex-decoded key signs differently');
  t.false(verifyWebhook(endpoint.secret, { ...headers, 'webhook-signature': hexSignature }, arrival.body));

  // A correct signature of a timestamp outside the tolerance: a replay.
  const old = Math.floor(Date.now() / 1000) - 301;
  const replayed = { ...headers, 'webhook-timestamp': String(old), 'webhook-signature': signatureHeader([endpoint.secret], String(headers['webhook-id']), old, arrival.body.toString('utf8')) };
  t.false(verifyWebhook(endpoint.secret, replayed, arrival.body), 'older than 300 s');
  t.true(verifyWebhook(endpoint.secret, replayed, arrival.body, 600), 'within a wider tolerance');
});

test('during a rotation\'s grace period the docs\' verifier accepts either secret', async (t) => {
  const verifyWebhook = await sample;
  const { key, endpoint, send } = await delivered(t);
  const rotated = await app.request('POST', `/v1/endpoints/${endpoint.id}/rotate-secret`, { key });
  t.is(rotated.status, 200);
  const newSecret = rotated.body.secret as string;
  t.not(newSecret, endpoint.secret);

  const arrival = await send('inv-2');
  const headers = arrival.headers as Record<string, unknown>;
  t.is(String(headers['webhook-signature']).split(' ').length, 2, 'two signatures');
  t.true(verifyWebhook(newSecret, headers, arrival.body), 'the new secret');
  t.true(verifyWebhook(endpoint.secret, headers, arrival.body), 'the previous secret');
  t.false(verifyWebhook(newSecret, headers, Buffer.from(arrival.body.toString('utf8').replace('in_1', 'in_2'))), 'a tampered body');
});
