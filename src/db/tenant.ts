// The isolation of every tenant-owned row: an organization and an environment.
import { sql, type FragmentSqlToken } from 'slonik';

export type Tenant = Readonly<{ orgId: string; environment: 'live' | 'test' }>;

/** `org_id = … and environment = …`, optionally for a table alias. */
export function ownedBy(tenant: Tenant, alias?: string): FragmentSqlToken {
  return alias
    ? sql.fragment`${sql.identifier([alias, 'org_id'])} = ${tenant.orgId} and ${sql.identifier([alias, 'environment'])} = ${tenant.environment}`
    : sql.fragment`org_id = ${tenant.orgId} and environment = ${tenant.environment}`;
}

/** A LIKE pattern matching `text` anywhere, with LIKE's own characters taken literally. */
export function containing(text: string): string {
  return `%${text.replace(/[\\%_]/g, '\\$&')}%`;
}
