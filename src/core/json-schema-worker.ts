// A validation worker thread (piscina): compiles each schema once (by cache key) and validates
// payloads against it, so a slow validation blocks this thread, never the web process.
import type { ValidateFunction } from 'ajv';
import { compileIsolated, draftOf, runValidator, type SchemaProblem } from './json-schema-engine.ts';

export type ValidationTask = { key: string; schemaText: string; payloadText: string } | { ping: true };
export type ValidationResult = { problems: SchemaProblem[] | null } | { tooDeep: true };

const compiled = new Map<string, ValidateFunction>();
const MAX_COMPILED = 200;

function validatorFor(key: string, schemaText: string): ValidateFunction {
  const known = compiled.get(key);
  if (known) return known;
  const schema = JSON.parse(schemaText) as Record<string, unknown>;
  const validate = compileIsolated(schema, draftOf(schema) ?? 'draft2020');
  if (compiled.size >= MAX_COMPILED) compiled.delete(compiled.keys().next().value as string);
  compiled.set(key, validate);
  return validate;
}

export default function validate(task: ValidationTask): ValidationResult {
  if ('ping' in task) return { problems: null };
  const validateFn = validatorFor(task.key, task.schemaText);
  try {
    return { problems: runValidator(validateFn, JSON.parse(task.payloadText)) };
  } catch (error) {
    if (error instanceof RangeError) return { tooDeep: true };
    throw error;
  }
}
