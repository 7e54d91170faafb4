// Event type schemas: checked when an event type is written and used to validate job payloads.
// JSON Schema 2020-12 unless `$schema` names draft-07 or 2019-09. No tenant input changes state
// another tenant uses: the meta-schema instances below only ever validate, and every schema is
// compiled in an Ajv instance of its own. Cost is bounded by the limits (schema-limits.ts), RE2,
// and a time budget: schemas that are not known-cheap are validated on a worker thread.
import { Ajv, type AnySchema, type ValidateFunction } from 'ajv';
import { Ajv2019 } from 'ajv/dist/2019.js';
import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import { compileIsolated, describeErrors, draftOf, runValidator, type SchemaProblem } from './json-schema-engine.ts';
import { validateOffThread } from './json-schema-pool.ts';
import { CHEAP_EXPANDED, checkSchemaLimits } from './schema-limits.ts';

export type { SchemaProblem } from './json-schema-engine.ts';

const addFormats = addFormatsModule as unknown as (ajv: Ajv) => Ajv;

// Meta-schema validation only: validateSchema never registers the schema it checks. Frozen in
// spirit: nothing here calls compile, addSchema or removeSchema with tenant input.
const metaOptions = { strict: false, allErrors: true, validateFormats: true } as const;
const metaValidators = {
  draft07: addFormats(new Ajv(metaOptions)),
  draft2019: addFormats(new Ajv2019(metaOptions) as unknown as Ajv),
  draft2020: addFormats(new Ajv2020(metaOptions) as unknown as Ajv),
};

/** Payloads up to this many characters of JSON are validated inline against a cheap schema. */
export const INLINE_MAX_PAYLOAD = 16_384;

/** A compiled event type schema. */
export type PayloadValidator = { validate: ValidateFunction; cheap: boolean; schemaText: string };

const internalMessage = (error: unknown) =>
  error instanceof RangeError ? 'is too deeply nested to compile' : String((error as Error).message).slice(0, 300);

/** Compiles a schema; problems (under `root`, e.g. "schema") when it is not a valid JSON Schema or breaks a limit. */
export function compileSchema(schema: Record<string, unknown>, root = 'schema'): { validator: PayloadValidator } | { problems: SchemaProblem[] } {
  const draft = draftOf(schema);
  if (!draft) {
    return { problems: [{ path: `${root}.$schema`, message: 'must be the URI of JSON Schema 2020-12, 2019-09 or draft-07' }] };
  }
  const limits = checkSchemaLimits(schema, root);
  if ('problems' in limits) return limits;
  const meta = metaValidators[draft];
  try {
    if (!meta.validateSchema(schema as AnySchema)) return { problems: describeErrors(meta.errors, root) };
    const validate = compileIsolated(schema, draft);
    const cheap = !limits.shape.recursive && limits.shape.expanded <= CHEAP_EXPANDED;
    return { validator: { validate, cheap, schemaText: JSON.stringify(schema) } };
  } catch (error) {
    // e.g. a $ref that resolves to nothing
    return { problems: [{ path: root, message: internalMessage(error) }] };
  }
}

/**
 * Validates a job payload: null when valid, else its problems (at most MAX_DETAILS). Cheap
 * schemas with small payloads run inline; the rest on a worker thread within a time budget,
 * past which the payload is refused (400) as too expensive to validate.
 */
export async function validatePayload(
  validator: PayloadValidator, cacheKey: string, payload: unknown, payloadText: string,
): Promise<SchemaProblem[] | null> {
  if (validator.cheap && payloadText.length <= INLINE_MAX_PAYLOAD) {
    try {
      return runValidator(validator.validate, payload);
    } catch (error) {
      if (!(error instanceof RangeError)) throw error;
      return [{ path: 'payload', message: 'is nested too deeply for the event type\'s schema' }];
    }
  }
  return validateOffThread(cacheKey, validator.schemaText, payloadText);
}
