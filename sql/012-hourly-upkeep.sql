-- Finished jobs older than p_after become archived; per-minute stats older than 8 days are
-- dropped (the stats API reads up to 7 days back) and the success rates of endpoints with
-- recent traffic moved on with the 24 h window (their running sums lose the minutes that left
-- it, as a recording's do: sql/009-success-rates.sql), for endpoints no recording touches.
create or replace function run_hourly_upkeep(p_after interval default interval '30 days') returns void
language plpgsql as $$
begin
  update webhook_jobs set status = 'archived'
    where status in ('succeeded', 'discarded') and completed_at < now() - p_after;
  perform add_to_success_rates(array_agg(e.id), array_agg(e.application_id), array_agg(null::timestamptz),
                               array_agg(0::bigint), array_agg(0::bigint))
    from endpoints e
    where e.id in (select endpoint_id from endpoint_attempt_stats where minute > now() - interval '25 hours'
                   union select endpoint_id from endpoint_success_windows where attempts > 0);
  delete from endpoint_attempt_stats where minute <= now() - interval '8 days';
end;
$$;

comment on function run_hourly_upkeep(interval) is
  'Archives jobs finished longer ago than p_after, keeps success rates to the trailing 24 h and per-minute stats to the trailing 8 days.';
