// The slonik pool: zod row schemas really checked, and explicit type parsers so rows reach
// the API edge as JSON-ready values (timestamps as ISO strings, counts as numbers).
import { createPool, SchemaValidationError, type DatabasePool, type Interceptor } from 'slonik';
import { parseTimestamptz } from './timestamps.ts';

export type { DatabasePool };

/** Validates every row of a `sql.type(schema)` query against its schema. */
const resultParser: Interceptor = {
  name: 'result-parser',
  transformRow(context, query, row) {
    const parser = context.resultParser;
    if (!parser) return row;
    const result = parser['~standard'].validate(row);
    if (result instanceof Promise) throw new TypeError('row schemas must be synchronous');
    if (result.issues) throw new SchemaValidationError(query, row, result.issues);
    return result.value as typeof row;
  },
};

const typeParsers = [
  { name: 'int8', parse: (value: string) => Number(value) },
  { name: 'numeric', parse: (value: string) => Number(value) },
  { name: 'timestamptz', parse: parseTimestamptz },
];

export type PoolOptions = { maximumPoolSize?: number; statementTimeoutMs?: number };

export async function makePool(databaseUrl: string, options: PoolOptions = {}): Promise<DatabasePool> {
  return createPool(databaseUrl, {
    interceptors: [resultParser],
    typeParsers,
    maximumPoolSize: options.maximumPoolSize ?? 10,
    statementTimeout: options.statementTimeoutMs ?? 30_000,
    idleTimeout: 10_000,
    connectionTimeout: 10_000,
    captureStackTrace: false,
    // slonik's default runs DISCARD ALL whenever a connection returns to the pool, which also
    // throws away every cached plan, the plpgsql functions' and triggers' included: each
    // transaction then re-plans all of them. Nothing here keeps session state (settings are
    // `set_config(..., true)`, transaction-local; record_attempts' temp table empties on commit).
    resetConnection: async () => {},
  });
}
