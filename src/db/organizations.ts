// Table organizations: the tenants.
import { sql } from 'slonik';
import { z } from 'zod';
import type { CommonQueryMethods } from 'slonik';

const organizationRow = z.object({ id: z.string(), name: z.string(), created_at: z.string() });
export type OrganizationRow = z.infer<typeof organizationRow>;

export async function insertOrganization(db: CommonQueryMethods, org: { id: string; name: string }): Promise<OrganizationRow> {
  return db.one(sql.type(organizationRow)`
    insert into organizations (id, name) values (${org.id}, ${org.name})
    returning id, name, created_at`);
}

const organizationSummary = organizationRow.extend({ api_keys: z.number().int() });
export type OrganizationSummary = z.infer<typeof organizationSummary>;

/** Every organization, oldest first, with how many API keys it has (operators: `npm run admin -- list-orgs`). */
export async function listOrganizations(db: CommonQueryMethods): Promise<readonly OrganizationSummary[]> {
  return db.any(sql.type(organizationSummary)`
    select o.id, o.name, o.created_at, (select count(*)::int from api_keys k where k.org_id = o.id) as api_keys
    from organizations o
    order by o.created_at, o.id`);
}

export async function findOrganization(db: CommonQueryMethods, id: string): Promise<OrganizationRow | null> {
  return db.maybeOne(sql.type(organizationRow)`select id, name, created_at from organizations where id = ${id}`);
}
