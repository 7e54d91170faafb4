// The overview counts of GET /v1/summary: one tenant's endpoints by health and its open
// deliveries (the backlog). Only bounded reads: endpoints of the tenant, and deliveries through
// the partial index of open deliveries (deliveries_endpoint_id_status_idx); finished deliveries
// and jobs are never counted here (a job count per status is the `total` of a filtered job list).
import { sql, type CommonQueryMethods } from 'slonik';
import { z } from 'zod';
import { heavyRead } from './heavy-reads.ts';
import { ownedBy, type Tenant } from './tenant.ts';

export const summaryRow = z.object({
  endpoints: z.object({
    total: z.number(), active: z.number(), paused: z.number(), disabled: z.number(), failing: z.number(),
  }),
  deliveries: z.object({ pending: z.number(), in_flight: z.number(), held: z.number() }),
});
export type SummaryRow = z.infer<typeof summaryRow>;

/** Counts of every live endpoint and open delivery of the tenant: a heavy read (heavy-reads.ts). */
export async function readSummary(db: CommonQueryMethods, tenant: Tenant): Promise<SummaryRow> {
  return heavyRead(db, () => db.one(sql.type(summaryRow)`
    with live as (
      select id, status, failure_count from endpoints where ${ownedBy(tenant)} and deleted_at is null
    ), open as (
      select d.status, count(*)::int as n from live e
      join deliveries d on d.endpoint_id = e.id and d.status in ('pending', 'in_flight', 'held')
      group by d.status
    )
    select
      json_build_object(
        'total', (select count(*)::int from live),
        'active', (select count(*)::int from live where status = 'active'),
        'paused', (select count(*)::int from live where status = 'paused'),
        'disabled', (select count(*)::int from live where status = 'disabled'),
        'failing', (select count(*)::int from live where status = 'active' and failure_count > 0)
      ) as endpoints,
      json_build_object(
        'pending', coalesce((select n from open where status = 'pending'), 0),
        'in_flight', coalesce((select n from open where status = 'in_flight'), 0),
        'held', coalesce((select n from open where status = 'held'), 0)
      ) as deliveries`));
}
