// Offset pagination (decisions section 5): `page` from 1, `per_page` 1..100.
import { sql, type CommonQueryMethods, type FragmentSqlToken, type ListSqlToken } from 'slonik';
import { z } from 'zod';
import { heavyRead } from './heavy-reads.ts';
import { inOneSnapshot } from './one-snapshot.ts';

export type PageRequest = { page: number; perPage: number };

export function limitOffset({ page, perPage }: PageRequest): FragmentSqlToken {
  return sql.fragment`limit ${perPage} offset ${(page - 1) * perPage}`;
}

export function pagination({ page, perPage }: PageRequest, total: number) {
  return { total, page, per_page: perPage, total_pages: Math.ceil(total / perPage) };
}

/**
 * A page of `table`'s rows matching `where`, newest first by (created_at, id), and their total.
 * The page's ids are found first, from the list's index, and only its own rows are read from the
 * table after, by primary key: the rows skipped before the page are never read from the table,
 * nor their per-row columns computed (an endpoint's subscriptions). `columns` name the table's
 * columns by its name (`endpoints.id`); `check` (the tenant's ownedBy) holds the page's rows
 * again where `where` found them by something else (docs/sql.md, "The lists and their indexes").
 * The total counts every matching row: a heavy read (heavy-reads.ts), in the page's snapshot.
 */
export async function newestFirstPage<Row extends z.ZodType>(
  db: CommonQueryMethods, row: Row,
  list: { table: string; where: FragmentSqlToken | ListSqlToken; columns: FragmentSqlToken; check?: FragmentSqlToken },
  page: PageRequest,
) {
  const table = sql.identifier([list.table]);
  return heavyRead(db, () => inOneSnapshot(db, async (db) => {
    const total = await db.oneFirst(sql.type(z.object({ total: z.number() }))`
      select count(*)::int as total from ${table} where ${list.where}`);
    const rows = await db.any(sql.type(row)`
      with page as (
        select id, created_at from ${table} where ${list.where}
        order by created_at desc, id desc ${limitOffset(page)}
      )
      select ${list.columns}
      from page join ${table} on ${table}.id = page.id
      ${list.check ? sql.fragment`where ${list.check}` : sql.fragment``}
      order by page.created_at desc, page.id desc`);
    return { rows, total };
  }));
}
