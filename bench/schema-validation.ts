// `npm run bench:schemas`: what payload validation costs the web process per job, inline (cheap
// schema, small payload) and on a worker thread (the hop), and the wall time of hostile schemas
// and payloads from creation to answer. No database: prepareValidator and validatePayload alone.
import { prepareValidator, validatePayload, type PayloadValidator } from '../src/core/json-schema.ts';
import { stopValidationPool } from '../src/core/json-schema-pool.ts';

async function compiled(schema: Record<string, unknown>): Promise<PayloadValidator> {
  const result = await prepareValidator(schema, 'bench', 'bench');
  if ('problems' in result) throw new Error(JSON.stringify(result.problems));
  return result;
}

const typical = await compiled({
  type: 'object', required: ['id', 'amount'],
  properties: {
    id: { type: 'string', format: 'uuid' }, amount: { type: 'integer', minimum: 0 }, at: { type: 'string', format: 'date-time' },
    lines: { type: 'array', items: { type: 'object', properties: { sku: { type: 'string', pattern: '^sku-[0-9]+$' }, qty: { type: 'integer' } } } },
  },
});
const payload = {
  id: '4a7f2c1e-9c1b-4d3a-8f00-123456789abc', amount: 1999, at: '2026-11-22T10:00:00.000Z',
  lines: Array.from({ length: 12 }, (_, i) => ({ sku: `sku-${i}`, qty: i })),
};
const text = JSON.stringify(payload);

async function perJob(label: string, validator: PayloadValidator, inFlight: number, jobs: number) {
  const cpu0 = process.threadCpuUsage();
  const t0 = performance.now();
  let next = 0;
  await Promise.all(Array.from({ length: inFlight }, async () => {
    while (next < jobs) {
      next += 1;
      if (await validatePayload(validator, payload, text)) throw new Error('payload should be valid');
    }
  }));
  const wall = performance.now() - t0;
  const cpu = process.threadCpuUsage(cpu0);
  console.log(`${label.padEnd(34)} ${(jobs / wall * 1000).toFixed(0).padStart(7)} validations/s  main-thread CPU ${((cpu.user + cpu.system) / jobs).toFixed(1).padStart(6)} us/job`);
}

if (!typical.inline) throw new Error('the typical schema should be cheap');
const offThread = { ...typical, inline: null };
await perJob('warm-up', offThread, 1, 200);
await perJob('inline (cheap schema, 600 B)', typical, 1, 20_000);
await perJob('worker thread, 1 in flight', offThread, 1, 3_000);
await perJob('worker thread, 32 in flight', offThread, 32, 5_000);

const hostile: Array<[string, Record<string, unknown>, unknown]> = [];
let nested: unknown = 'leaf';
for (let i = 0; i < 40; i += 1) nested = [nested];
hostile.push(['pattern ^(a+)+$, 100k chars', { type: 'object', properties: { s: { pattern: '^(a+)+$' } } }, { s: `${'a'.repeat(100_000)}!` }]);
hostile.push(['patternProperties key, 100k chars', { type: 'object', patternProperties: { '^(a|a)*$': { type: 'integer' } } }, { [`${'a'.repeat(100_000)}!`]: 1 }]);
hostile.push(['uniqueItems, 8,000 objects', { type: 'object', properties: { u: { uniqueItems: true } } }, { u: Array.from({ length: 8_000 }, (_, i) => ({ i, t: ['a', i] })) }]);
hostile.push(['20,000 errors', { type: 'object', properties: { l: { items: { type: 'string' } } } }, { l: Array(20_000).fill(1) }]);
hostile.push(['recursive anyOf, 2^40 paths', {
  type: 'object', properties: { t: { $ref: '#/$defs/n' } },
  $defs: { n: { anyOf: [{ type: 'array', items: { $ref: '#/$defs/n' } }, { type: 'array', items: { $ref: '#/$defs/n' } }, { type: 'integer' }] } },
}, { t: nested }]);
const defs: Record<string, unknown> = { a19: { type: 'string' } };
for (let i = 0; i < 19; i += 1) defs[`a${i}`] = { anyOf: [{ $ref: `#/$defs/a${i + 1}` }, { $ref: `#/$defs/a${i + 1}` }] };
hostile.push(['1,500 properties with patterns (48 KB)', { type: 'object', properties: Object.fromEntries(Array.from({ length: 1_500 }, (_, i) => [`p${i}`, { pattern: `^(a+)+${i}$` }])) }, {}]);
hostile.push(['anyOf of $refs, 2^19 branches', { $ref: '#/$defs/a0', $defs: defs }, {}]);
let worst = 0;
for (const [label, schema, body] of hostile) {
  const t0 = performance.now();
  const cpu0 = process.threadCpuUsage();
  const result = await prepareValidator(schema, label, 'bench');
  const outcome = 'problems' in result ? `refused at creation: ${result.problems[0]?.message}`
    : await validatePayload(result, body, JSON.stringify(body)).then((p) => (p ? `400: ${p[0]?.message}` : 'valid'));
  const ms = performance.now() - t0;
  const cpu = process.threadCpuUsage(cpu0);
  worst = Math.max(worst, ms);
  console.log(`${label.padEnd(34)} ${ms.toFixed(0).padStart(6)} ms (main thread busy ${((cpu.user + cpu.system) / 1000).toFixed(0).padStart(4)} ms)  ${outcome.slice(0, 80)}`);
}
console.log(`worst hostile schema, creation to answer: ${worst.toFixed(0)} ms`);
await stopValidationPool();
