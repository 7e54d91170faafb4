-- Success rate over the trailing 24 h: successful attempts in percent, two decimals, 100 when none.
-- Rows whose rate did not change are not rewritten (no lock held against claims, no new row version).
create or replace function refresh_success_rates(p_endpoint_ids text[]) returns void
language sql as $$
  update endpoints e set success_rate = x.rate
  from (select e2.id, coalesce(
          (select round(100.0 * sum(s.successes) / nullif(sum(s.attempts), 0), 2)
           from endpoint_attempt_stats s where s.endpoint_id = e2.id and s.minute > now() - interval '24 hours'), 100) as rate
        from endpoints e2 where e2.id = any(p_endpoint_ids)) x
  where e.id = x.id and e.success_rate is distinct from x.rate;
  update applications a set success_rate = x.rate
  from (select a2.id, coalesce(
          (select round(100.0 * sum(s.successes) / nullif(sum(s.attempts), 0), 2)
           from endpoint_attempt_stats s where s.application_id = a2.id and s.minute > now() - interval '24 hours'), 100) as rate
        from applications a2 where a2.id in (select e.application_id from endpoints e where e.id = any(p_endpoint_ids))) x
  where a.id = x.id and a.success_rate is distinct from x.rate;
$$;

comment on function refresh_success_rates(text[]) is
  'Recomputes success_rate of these endpoints and their applications from the last 24 h of endpoint_attempt_stats.';
