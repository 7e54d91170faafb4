// Hourly archiving through run_hourly_upkeep() (sql/012-hourly-upkeep.sql): jobs finished 30
// days ago become `archived`, and success rates and per-minute stats keep to the trailing
// 24 h. Retention (retention.ts) then deletes archived jobs past their own limit.
import { sql, type CommonQueryMethods } from 'slonik';

export async function runHourlyUpkeep(db: CommonQueryMethods): Promise<void> {
  await db.query(sql.unsafe`select run_hourly_upkeep()`);
}
