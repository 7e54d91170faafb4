// Event type schemas: checked with Ajv when an event type is written, and (with the
// delivery issue) used to validate job payloads. JSON Schema 2020-12 unless `$schema`
// names draft-07 or 2019-09.
import { Ajv, type AnySchema, type ErrorObject, type ValidateFunction } from 'ajv';
import { Ajv2019 } from 'ajv/dist/2019.js';
import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';

// ajv-formats is CommonJS; its default export is the plugin function.
const addFormats = addFormatsModule as unknown as (ajv: Ajv) => Ajv;

// strict: false, because real-world schemas carry annotations Ajv does not know ("example",
// vendor keywords); a schema is still refused when it breaks its draft's meta-schema.
const options = { strict: false, allErrors: true, validateFormats: true } as const;
const validators = {
  draft07: addFormats(new Ajv(options)),
  draft2019: addFormats(new Ajv2019(options) as unknown as Ajv),
  draft2020: addFormats(new Ajv2020(options) as unknown as Ajv),
};

function validatorFor(schema: Record<string, unknown>): Ajv | null {
  const declared = schema.$schema;
  if (declared === undefined) return validators.draft2020;
  if (typeof declared !== 'string') return null;
  const uri = declared.replace(/#$/, '').replace(/^http:/, 'https:');
  if (uri === 'https://json-schema.org/draft/2020-12/schema') return validators.draft2020;
  if (uri === 'https://json-schema.org/draft/2019-09/schema') return validators.draft2019;
  if (uri === 'https://json-schema.org/draft-07/schema') return validators.draft07;
  return null;
}

export type SchemaProblem = { path: string; message: string };

const describe = (errors: ErrorObject[] | null | undefined, root: string): SchemaProblem[] =>
  (errors ?? []).map((e) => ({ path: `${root}${e.instancePath.replaceAll('/', '.')}`, message: e.message ?? 'is invalid' }));

/** Compiles a schema; problems (under `root`, e.g. "schema") when it is not a valid JSON Schema. */
export function compileSchema(schema: Record<string, unknown>, root = 'schema'): { validate: ValidateFunction } | { problems: SchemaProblem[] } {
  const ajv = validatorFor(schema);
  if (!ajv) {
    return { problems: [{ path: `${root}.$schema`, message: 'must be the URI of JSON Schema 2020-12, 2019-09 or draft-07' }] };
  }
  if (!ajv.validateSchema(schema as AnySchema)) return { problems: describe(ajv.errors, root) };
  try {
    return { validate: ajv.compile(schema as AnySchema) };
  } catch (error) {
    // e.g. a $ref that resolves to nothing
    return { problems: [{ path: root, message: (error as Error).message }] };
  } finally {
    // Tenants share these Ajv instances: never leave a schema (or its $id) registered, so
    // one tenant's schema can neither clash with nor be $ref'd by another's.
    ajv.removeSchema(schema as AnySchema);
  }
}
