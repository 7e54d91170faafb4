// Reads that answer together from one snapshot. Under READ COMMITTED each statement sees what
// committed before it began, so a list's total and its page, or an application and its
// endpoints, read by two statements contradicted each other when a write committed between
// them (a probe creating and deleting endpoints while reading: `total` 1 with no row in 8 of 69
// endpoint lists, `endpoints_count` 1 with no endpoint listed in 13 of 215 application reads).
import { sql, type CommonQueryMethods, type DatabasePool } from 'slonik';

/**
 * `read` through one REPEATABLE READ, READ ONLY transaction when `db` is a pool (three round
 * trips more: begin with its setting, commit); through `db` as it is when it is a caller's
 * transaction or connection, whose own isolation then decides.
 */
export async function inOneSnapshot<T>(db: CommonQueryMethods, read: (db: CommonQueryMethods) => Promise<T>): Promise<T> {
  if (!('connect' in db)) return read(db);
  return (db as DatabasePool).transaction(async (tx) => {
    await tx.query(sql.unsafe`set transaction isolation level repeatable read, read only`);
    return read(tx);
  });
}
