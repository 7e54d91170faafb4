// The Ajv set-up used to validate payloads, shared by the web process and the validation
// worker threads: one fresh Ajv instance per compiled schema (tenants never share one), RE2
// (linear time) for `pattern` and `patternProperties`, and a linear `uniqueItems`.
import { Ajv, type AnySchema, type ErrorObject, type ValidateFunction } from 'ajv';
import { Ajv2019 } from 'ajv/dist/2019.js';
import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import { RE2JS } from 're2js';

// ajv-formats is CommonJS; its default export is the plugin function.
const addFormats = addFormatsModule as unknown as (ajv: Ajv) => Ajv;

export type Draft = 'draft07' | 'draft2019' | 'draft2020';

/** The draft a schema's `$schema` names (2020-12 when absent), or null for any other value. */
export function draftOf(schema: Record<string, unknown>): Draft | null {
  const declared = schema.$schema;
  if (declared === undefined) return 'draft2020';
  if (typeof declared !== 'string') return null;
  const uri = declared.replace(/#$/, '').replace(/^http:/, 'https:');
  if (uri === 'https://json-schema.org/draft/2020-12/schema') return 'draft2020';
  if (uri === 'https://json-schema.org/draft/2019-09/schema') return 'draft2019';
  if (uri === 'https://json-schema.org/draft-07/schema') return 'draft07';
  return null;
}

/** A tenant's pattern on RE2: throws (with RE2's reason) on syntax RE2 lacks (lookaround, backreferences). */
export function compilePattern(pattern: string): RE2JS {
  return RE2JS.compile(RE2JS.translateRegExp(pattern));
}

// Ajv's regExp engine: it keys compiled patterns by toString(), so that must name the pattern.
const re2Engine = Object.assign((pattern: string) => {
  const compiled = compilePattern(pattern);
  return { test: (s: string) => compiled.test(s), toString: () => `re2:${pattern}` };
}, { code: 'compilePattern' });

// JSON equality in linear time: items become canonical strings (object keys sorted) in a Set,
// where Ajv's own uniqueItems compares every pair of non-scalar items.
function canonical(value: unknown): string {
  if (value === null || typeof value !== 'object') return typeof value === 'number' ? String(value) : JSON.stringify(value);
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`;
  const object = value as Record<string, unknown>;
  return `{${Object.keys(object).sort().map((k) => `${JSON.stringify(k)}:${canonical(object[k])}`).join(',')}}`;
}

type KeywordValidate = ((schema: boolean, data: unknown[]) => boolean) & { errors?: Partial<ErrorObject>[] };
const uniqueItems: KeywordValidate = (schema, data) => {
  if (!schema) return true;
  const seen = new Map<string, number>();
  for (let i = 0; i < data.length; i += 1) {
    const key = canonical(data[i]);
    const j = seen.get(key);
    if (j !== undefined) {
      uniqueItems.errors = [{ keyword: 'uniqueItems', params: { i, j }, message: `must NOT have duplicate items (items ## ${j} and ${i} are identical)` }];
      return false;
    }
    seen.set(key, i);
  }
  return true;
};

// strict: false, because real-world schemas carry annotations Ajv does not know ("example",
// vendor keywords). The meta-schema check is done before, on a separate instance. logger: false:
// Ajv's warnings ('unknown format "…" ignored in schema at path "…"') went to the console, a
// tenant's text in raw lines among the JSON log (a format with newlines wrote a forged log line)
// and one line per unknown format of a schema at every compile (a probe: 5,000 lines, 328 KB,
// for one request of 56 KB).
export const AJV_QUIET = { logger: false } as const;
// inlineRefs: false: a $ref's definition is compiled once, as a function of its own, not copied
// into each place that uses it: 100 $refs to one definition of 37 properties made 1.4-1.7 s of
// compile (a 4 KB schema, a probe), 30-50 ms without the copies, and its validations were faster.
// ownProperties: `required` and `properties` look at the payload's own members only. Without it,
// a payload `{}` met `required: ["toString"]` (inherited from Object.prototype) and failed
// `properties: {"constructor": {"type": "number"}}` (a probe).
const compileOptions = {
  ...AJV_QUIET, strict: false, allErrors: true, validateFormats: true, validateSchema: false, meta: false, ownProperties: true, inlineRefs: false,
  code: { regExp: re2Engine },
} as const;

const constructors = { draft07: Ajv, draft2019: Ajv2019, draft2020: Ajv2020 } as const;

/**
 * Compiles a schema in an Ajv instance of its own; throws what Ajv throws. `allErrors: false`
 * stops at a payload's first problem: what the web process runs inline, since collecting every
 * problem grows with the failed branches of every value (an anyOf of $refs over 800 array items:
 * 0.9 s and 100 MB held; 2,000 items ran the process out of memory). All of them are collected
 * on a validation thread, within its budgets.
 */
export function compileIsolated(schema: Record<string, unknown>, draft: Draft, allErrors = true): ValidateFunction {
  const ajv = addFormats(new constructors[draft]({ ...compileOptions, allErrors }) as unknown as Ajv);
  ajv.removeKeyword('uniqueItems');
  ajv.addKeyword({ keyword: 'uniqueItems', type: 'array', schemaType: 'boolean', validate: uniqueItems, errors: true });
  return ajv.compile(schema as AnySchema);
}

export type SchemaProblem = { path: string; message: string };

export const MAX_DETAILS = 20;
const MAX_TEXT = 300;

const clip = (text: string) => (text.length > MAX_TEXT ? `${text.slice(0, MAX_TEXT - 1)}…` : text);

/** At most MAX_DETAILS problems, each path and message at most MAX_TEXT characters, under `root`. */
export function describeErrors(errors: ErrorObject[] | null | undefined, root: string): SchemaProblem[] {
  const all = errors ?? [];
  const problems = all.slice(0, MAX_DETAILS).map((e) => ({
    path: clip(`${root}${e.instancePath.replaceAll('/', '.')}`), message: clip(e.message ?? 'is invalid'),
  }));
  if (all.length > MAX_DETAILS) {
    problems.push({ path: root, message: `and ${all.length - MAX_DETAILS} more problems (only the first ${MAX_DETAILS} are listed)` });
  }
  return problems;
}

/** Runs a compiled validator: null when the payload is valid, else its problems (bounded). */
export function runValidator(validate: ValidateFunction, payload: unknown, root = 'payload'): SchemaProblem[] | null {
  if (validate(payload)) return null;
  return describeErrors(validate.errors, root);
}
