// Offset pagination (decisions section 5): `page` from 1, `per_page` 1..100.
import { sql, type FragmentSqlToken } from 'slonik';

export type PageRequest = { page: number; perPage: number };

export function limitOffset({ page, perPage }: PageRequest): FragmentSqlToken {
  return sql.fragment`limit ${perPage} offset ${(page - 1) * perPage}`;
}

export function pagination({ page, perPage }: PageRequest, total: number) {
  return { total, page, per_page: perPage, total_pages: Math.ceil(total / perPage) };
}
