-- Success rate over the trailing 24 h: successful attempts in percent, two decimals, 100 when none.
-- Rows whose rate did not change are not rewritten (no lock held against claims, no new row version).
--
-- A few endpoints (a recording at a low rate holds one or two) are refreshed one at a time: each
-- statement then has a single key for a parameter, so plpgsql keeps one plan for it (planning
-- ~0.01 ms). Set-based, the two statements below take an array, which PostgreSQL plans anew on
-- every call (about 1 ms together on a 2-core machine, most of a small recording's refresh);
-- for more endpoints that one planning costs less than their statements one by one.
-- The rate itself, from the sums of a window's attempts and successes (null sums: no attempts).
-- A one-expression SQL function, so PostgreSQL inlines it: the statements below plan as before.
create or replace function success_rate_of(p_successes numeric, p_attempts numeric) returns numeric
language sql immutable as $$
  select coalesce(round(100.0 * p_successes / nullif(p_attempts, 0), 2), 100)
$$;

comment on function success_rate_of(numeric, numeric) is
  'Successes in percent of attempts, two decimals; 100 when there were none.';

create or replace function refresh_success_rates(p_endpoint_ids text[]) returns void
language plpgsql as $$
declare
  v_endpoint text;
  v_application text;
  v_applications text[] := '{}';
begin
  if cardinality(p_endpoint_ids) <= 4 then
    foreach v_endpoint in array p_endpoint_ids loop
      update endpoints e set success_rate = r.rate
      from (select success_rate_of(sum(s.successes), sum(s.attempts)) as rate
            from endpoint_attempt_stats s where s.endpoint_id = v_endpoint and s.minute > now() - interval '24 hours') r
      where e.id = v_endpoint and e.success_rate is distinct from r.rate;
      select e.application_id into v_application from endpoints e where e.id = v_endpoint;
      if v_application is not null and not v_application = any(v_applications) then
        v_applications := v_applications || v_application;
      end if;
    end loop;
    foreach v_application in array v_applications loop
      update applications a set success_rate = r.rate
      from (select success_rate_of(sum(s.successes), sum(s.attempts)) as rate
            from endpoint_attempt_stats s where s.application_id = v_application and s.minute > now() - interval '24 hours') r
      where a.id = v_application and a.success_rate is distinct from r.rate;
    end loop;
    return;
  end if;

  update endpoints e set success_rate = x.rate
  from (select e2.id, (
          select success_rate_of(sum(s.successes), sum(s.attempts))
          from endpoint_attempt_stats s where s.endpoint_id = e2.id and s.minute > now() - interval '24 hours') as rate
        from endpoints e2 where e2.id = any(p_endpoint_ids)) x
  where e.id = x.id and e.success_rate is distinct from x.rate;
  update applications a set success_rate = x.rate
  from (select a2.id, (
          select success_rate_of(sum(s.successes), sum(s.attempts))
          from endpoint_attempt_stats s where s.application_id = a2.id and s.minute > now() - interval '24 hours') as rate
        from applications a2 where a2.id in (select e.application_id from endpoints e where e.id = any(p_endpoint_ids))) x
  where a.id = x.id and a.success_rate is distinct from x.rate;
end;
$$;

comment on function refresh_success_rates(text[]) is
  'Recomputes success_rate of these endpoints and their applications from the last 24 h of endpoint_attempt_stats.';
