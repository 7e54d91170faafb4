// Table applications: typed queries, all scoped to a tenant and to live (not deleted) rows.
import { sql, type CommonQueryMethods, type SerializableValue } from 'slonik';
import { z } from 'zod';
import { newestFirstPage, type PageRequest } from './offset.ts';
import { applicationsOf, containing, type Tenant } from './tenant.ts';

export const applicationRow = z.object({
  id: z.string(),
  name: z.string(),
  uid: z.string().nullable(),
  metadata: z.record(z.string(), z.unknown()),
  endpoints_count: z.number(),
  webhook_jobs_count: z.number(),
  success_rate: z.number(),
  created_at: z.string(),
  updated_at: z.string(),
});
export type ApplicationRow = z.infer<typeof applicationRow>;

export const applicationSummaryRow = applicationRow.omit({ metadata: true, updated_at: true });
const columns = sql.fragment`id, name, uid, metadata, endpoints_count, webhook_jobs_count, success_rate, created_at, updated_at`;

export async function insertApplication(
  db: CommonQueryMethods,
  tenant: Tenant,
  app: { id: string; name: string; uid: string | null; metadata: Record<string, unknown> },
): Promise<ApplicationRow> {
  return db.one(sql.type(applicationRow)`
    insert into applications (id, org_id, environment, name, uid, metadata)
    values (${app.id}, ${tenant.orgId}, ${tenant.environment}, ${app.name}, ${app.uid}, ${sql.jsonb(app.metadata as SerializableValue)})
    returning ${columns}`);
}

export async function findApplication(db: CommonQueryMethods, tenant: Tenant, id: string): Promise<ApplicationRow | null> {
  return db.maybeOne(sql.type(applicationRow)`
    select ${columns} from applications where ${applicationsOf(tenant)} and id = ${id} and deleted_at is null`);
}

export async function findApplicationByUid(db: CommonQueryMethods, tenant: Tenant, uid: string): Promise<ApplicationRow | null> {
  return db.maybeOne(sql.type(applicationRow)`
    select ${columns} from applications where ${applicationsOf(tenant)} and uid = ${uid} and deleted_at is null`);
}

/**
 * Locks a live application against a concurrent delete while an endpoint is created under it,
 * and answers its live endpoints (null: no such live application of the tenant's). `for no key
 * update`, not `for share`: the creation's count trigger updates this row, and two transactions
 * each upgrading a shared lock would deadlock. The lock also makes the count exact until the
 * transaction ends: a concurrent creation waits for it, then reads the count this one left.
 */
export async function lockApplication(db: CommonQueryMethods, tenant: Tenant, id: string): Promise<number | null> {
  return db.maybeOneFirst(sql.type(z.object({ endpoints_count: z.number() }))`
    select endpoints_count from applications where ${applicationsOf(tenant)} and id = ${id} and deleted_at is null for no key update`);
}

/** The live endpoints of an endpoint's application (read after a restore, which locked that row). */
export async function endpointsOfApplicationOf(db: CommonQueryMethods, endpointId: string): Promise<number> {
  return db.oneFirst(sql.type(z.object({ endpoints_count: z.number() }))`
    select a.endpoints_count from applications a join endpoints e on e.application_id = a.id where e.id = ${endpointId}`);
}

/**
 * Applications newest first, a page's ids first and its rows read after: the applications
 * skipped before the page are read from the index (org_id, environment, created_at, id) alone,
 * not from the table (docs/sql.md, "The lists and their indexes").
 */
export async function listApplications(db: CommonQueryMethods, tenant: Tenant, page: PageRequest & { search?: string }) {
  const search = page.search === undefined
    ? sql.fragment``
    : sql.fragment`and (name ilike ${containing(page.search)} or uid ilike ${containing(page.search)})`;
  return newestFirstPage(db, applicationSummaryRow, {
    table: 'applications',
    where: sql.fragment`${applicationsOf(tenant)} and deleted_at is null ${search}`,
    columns: sql.fragment`applications.id, name, uid, endpoints_count, webhook_jobs_count, success_rate, applications.created_at`,
  }, page);
}

export type ApplicationPatch = { name?: string; uid?: string | null; metadata?: Record<string, unknown> };

export const applicationPatchedRow = applicationRow.pick({ id: true, name: true, uid: true, metadata: true, updated_at: true });

export async function updateApplication(db: CommonQueryMethods, tenant: Tenant, id: string, patch: ApplicationPatch) {
  const sets = [
    patch.name !== undefined ? sql.fragment`name = ${patch.name}` : null,
    patch.uid !== undefined ? sql.fragment`uid = ${patch.uid}` : null,
    patch.metadata !== undefined ? sql.fragment`metadata = ${sql.jsonb(patch.metadata as SerializableValue)}` : null,
  ].filter((s) => s !== null);
  return db.maybeOne(sql.type(applicationPatchedRow)`
    update applications set ${sql.join(sets.length ? sets : [sql.fragment`name = name`], sql.fragment`, `)}
    where ${applicationsOf(tenant)} and id = ${id} and deleted_at is null
    returning id, name, uid, metadata, updated_at`);
}

const deletedRow = z.object({ id: z.string(), deleted_at: z.string() });

/**
 * Soft delete; a trigger soft-deletes the application's endpoints in the same statement. It
 * locks no job and no delivery: the workers' upkeep drops the endpoints' waiting deliveries and
 * soft-deletes the jobs afterwards (sql/003-soft-delete.sql). (It locked the jobs of every open
 * delivery first, in id order, as a recording locks them, while its cascade dropped deliveries
 * and soft-deleted jobs: a recording takes its jobs, then its application, and the delete took
 * the application, then the jobs.)
 */
export async function softDeleteApplication(db: CommonQueryMethods, tenant: Tenant, id: string) {
  return db.maybeOne(sql.type(deletedRow)`
    update applications set deleted_at = now()
    where ${applicationsOf(tenant)} and id = ${id} and deleted_at is null
    returning id, deleted_at`);
}

/**
 * The upkeep's step after application deletes: at most `batch` of their jobs soft-deleted, in
 * one transaction (delete_jobs_of_deleted_applications, sql/003-soft-delete.sql). Returns how
 * many; 0 also while another worker runs it.
 */
export async function deleteJobsOfDeletedApplications(db: CommonQueryMethods, batch: number): Promise<number> {
  return db.oneFirst(sql.type(z.object({ deleted: z.number() }))`
    select delete_jobs_of_deleted_applications(${batch}) as deleted`);
}
