// The isolation of every tenant-owned row: an organization and an environment, and for an
// application-scoped credential (a portal token) one application of it.
import { sql, type FragmentSqlToken } from 'slonik';

/**
 * Whose rows a query may touch. `applicationId` is set for a portal token: every query built
 * with ownedBy() is then limited to that application, so a query cannot forget the limit.
 */
export type Tenant = Readonly<{ orgId: string; environment: 'live' | 'test'; applicationId?: string | undefined }>;

/**
 * `org_id = … and environment = …` and the application limit, optionally for a table alias.
 * `applicationColumn` names the column holding the row's application (`id` for applications).
 * Without an application limit it reads `<column> is not null` (a no-op on a not-null column
 * that the planner drops), so a table without that column fails loudly with any credential:
 * rows that belong to no application (event types) use inEnvironment() instead.
 */
export function ownedBy(tenant: Tenant, alias?: string, applicationColumn = 'application_id'): FragmentSqlToken {
  const column = (name: string) => (alias ? sql.identifier([alias, name]) : sql.identifier([name]));
  const application = tenant.applicationId === undefined
    ? sql.fragment`${column(applicationColumn)} is not null`
    : sql.fragment`${column(applicationColumn)} = ${tenant.applicationId}`;
  return sql.fragment`${inEnvironment(tenant, alias)} and ${application}`;
}

/** ownedBy() for the applications table itself: its own id is the application. */
export function applicationsOf(tenant: Tenant, alias?: string): FragmentSqlToken {
  return ownedBy(tenant, alias, 'id');
}

/**
 * One application's rows by `application_id` alone, once a one-time check has found the
 * application to be the tenant's (with a portal token's limit: applicationsOf). A row's org_id
 * and environment are its application's (every insert copies them), so a list's index on
 * `(application_id, …)` answers without reading each row from the table to check them: with
 * ownedBy() a deep page read every row before it (docs/sql.md, "The lists and their indexes").
 * Lists still check the page's own rows with ownedBy().
 */
export function ofApplication(tenant: Tenant, applicationId: string): FragmentSqlToken {
  return sql.fragment`application_id = ${applicationId}
    and exists (select 1 from applications listed_app where listed_app.id = ${applicationId} and ${applicationsOf(tenant, 'listed_app')})`;
}

/** `org_id = … and environment = …` alone: for rows shared by every application (event types). */
export function inEnvironment(tenant: Tenant, alias?: string): FragmentSqlToken {
  return alias
    ? sql.fragment`${sql.identifier([alias, 'org_id'])} = ${tenant.orgId} and ${sql.identifier([alias, 'environment'])} = ${tenant.environment}`
    : sql.fragment`org_id = ${tenant.orgId} and environment = ${tenant.environment}`;
}

/** A LIKE pattern matching `text` anywhere, with LIKE's own characters taken literally. */
export function containing(text: string): string {
  return `%${text.replace(/[\\%_]/g, '\\$&')}%`;
}
