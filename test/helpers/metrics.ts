// The Prometheus text format as a scraper reads it, for the tests that read /metrics
// (test/metrics.test.ts, test/wakeup.test.ts).
export type Sample = { name: string; labels: Record<string, string>; value: number };
export type Exposition = { types: Map<string, string>; samples: Sample[] };

const SAMPLE_LINE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)(?: -?\d+)?$/;
const LABEL_PAIR = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"(,|$)/y;

/** A sample value as Prometheus reads it (Go's ParseFloat: Inf and NaN in any case; prom-client writes `Nan`). */
function parseValue(text: string): number {
  if (/^\+?inf(inity)?$/i.test(text)) return Infinity;
  if (/^-inf(inity)?$/i.test(text)) return -Infinity;
  if (/^nan$/i.test(text)) return NaN;
  const value = Number(text);
  if (Number.isNaN(value)) throw new Error(`not a sample value: ${text}`);
  return value;
}

function parseLabels(text: string): Record<string, string> {
  const labels: Record<string, string> = {};
  LABEL_PAIR.lastIndex = 0;
  while (LABEL_PAIR.lastIndex < text.length) {
    const at = LABEL_PAIR.lastIndex;
    const match = LABEL_PAIR.exec(text);
    if (!match) throw new Error(`bad label set at ${at}: {${text}}`);
    labels[match[1]!] = match[2]!.replace(/\\(.)/g, (_, c: string) => (c === 'n' ? '\n' : c));
  }
  return labels;
}

/** The Prometheus text format (0.0.4), line by line; any line it does not understand fails the test. */
export function parseExposition(text: string): Exposition {
  const types = new Map<string, string>();
  const samples: Sample[] = [];
  for (const line of text.split('\n')) {
    if (line === '') continue;
    if (line.startsWith('#')) {
      const type = /^# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) (counter|gauge|histogram|summary|untyped)$/.exec(line);
      if (type) types.set(type[1]!, type[2]!);
      else if (!line.startsWith('# HELP ')) throw new Error(`unexpected comment line: ${line}`);
      continue;
    }
    const match = SAMPLE_LINE.exec(line);
    if (!match) throw new Error(`not a sample line: ${line}`);
    samples.push({ name: match[1]!, labels: match[2] ? parseLabels(match[2]) : {}, value: parseValue(match[3]!) });
  }
  return { types, samples };
}

/** Samples named `name` whose labels include every pair of `labels`. */
export function select(e: Exposition, name: string, labels: Record<string, string> = {}): Sample[] {
  return e.samples.filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v));
}

/** The value of the one sample named `name` with exactly these labels; undefined when there is none. */
export function valueOf(e: Exposition, name: string, labels: Record<string, string> = {}): number | undefined {
  const found = e.samples.filter((s) => s.name === name
    && Object.keys(s.labels).length === Object.keys(labels).length
    && Object.entries(labels).every(([k, v]) => s.labels[k] === v));
  if (found.length > 1) throw new Error(`${found.length} samples ${name} ${JSON.stringify(labels)}`);
  return found[0]?.value;
}

export type Scrape = { status: number; contentType: string | null; exposition: Exposition };

export async function scrape(url: string): Promise<Scrape> {
  const res = await fetch(url);
  const text = await res.text();
  return { status: res.status, contentType: res.headers.get('content-type'), exposition: res.status === 200 ? parseExposition(text) : { types: new Map(), samples: [] } };
}
