// The whole check of a tenant schema, as run on a validation thread: its draft, the limits,
// its draft's meta-schema, then a compile in an Ajv instance of its own. The meta-schema
// instances only ever validate: no tenant schema is added to them or removed from them.
import { Ajv, type AnySchema, type ValidateFunction } from 'ajv';
import { Ajv2019 } from 'ajv/dist/2019.js';
import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import { AJV_QUIET, compileIsolated, describeErrors, draftOf, type Draft, type SchemaProblem } from './json-schema-engine.ts';
import { checkSchemaLimits, type SchemaShape } from './schema-limits.ts';

const addFormats = addFormatsModule as unknown as (ajv: Ajv) => Ajv;

const metaOptions = { ...AJV_QUIET, strict: false, allErrors: true, validateFormats: true } as const;
let metaValidators: Record<Draft, Ajv> | null = null;
const metaFor = (draft: Draft): Ajv => {
  metaValidators ??= {
    draft07: addFormats(new Ajv(metaOptions)),
    draft2019: addFormats(new Ajv2019(metaOptions) as unknown as Ajv),
    draft2020: addFormats(new Ajv2020(metaOptions) as unknown as Ajv),
  };
  return metaValidators[draft];
};

export type CheckedSchema = { validate: ValidateFunction; shape: SchemaShape };

/**
 * Problems (paths under `root`) when the schema is not a valid JSON Schema or breaks a limit; else
 * it compiled (collecting every problem of a payload, or only its first: compileIsolated), unless
 * `compileIf` says its shape is not to be compiled here: then only its shape.
 */
export function checkAndCompile(schema: Record<string, unknown>, root?: string, allErrors?: boolean): { problems: SchemaProblem[] } | CheckedSchema;
export function checkAndCompile(
  schema: Record<string, unknown>, root: string, allErrors: boolean, compileIf: (shape: SchemaShape) => boolean,
): { problems: SchemaProblem[] } | CheckedSchema | { uncompiled: SchemaShape };
export function checkAndCompile(
  schema: Record<string, unknown>, root = 'schema', allErrors = true, compileIf?: (shape: SchemaShape) => boolean,
): { problems: SchemaProblem[] } | CheckedSchema | { uncompiled: SchemaShape } {
  const draft = draftOf(schema);
  if (!draft) return { problems: [{ path: `${root}.$schema`, message: 'must be the URI of JSON Schema 2020-12, 2019-09 or draft-07' }] };
  const limits = checkSchemaLimits(schema, root);
  if ('problems' in limits) return limits;
  const meta = metaFor(draft);
  try {
    if (!meta.validateSchema(schema as AnySchema)) return { problems: describeErrors(meta.errors, root) };
    if (compileIf && !compileIf(limits.shape)) return { uncompiled: limits.shape };
    return { validate: compileIsolated(schema, draft, allErrors), shape: limits.shape };
  } catch (error) {
    // e.g. a $ref that resolves to nothing
    const message = error instanceof RangeError ? 'is too deeply nested to compile' : String((error as Error).message).slice(0, 300);
    return { problems: [{ path: root, message }] };
  }
}
