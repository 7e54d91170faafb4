// accept_job_group waits at most a second for a lock (its lock_timeout, sql/005-accept-job.sql),
// then the web process accepts each job of the group alone. Tests whose device for a group held
// as long as they need is a lock they hold turn that off in their own database.
import { sql, type DatabasePool } from 'slonik';

/**
 * Lets accept_job_group wait for locks as long as they are held, in this test database only;
 * the function returned puts its second back.
 */
export async function groupsWaitForLocks(pool: DatabasePool): Promise<() => Promise<void>> {
  await pool.query(sql.unsafe`alter function accept_job_group set lock_timeout = 0`);
  return async () => {
    await pool.query(sql.unsafe`alter function accept_job_group set lock_timeout = '1s'`);
  };
}
