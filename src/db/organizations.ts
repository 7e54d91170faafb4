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
