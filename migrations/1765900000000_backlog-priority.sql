-- Up Migration
-- enqueue_delivery_messages() takes the messages' queue priority (p_priority, default 0): a
-- recovered endpoint's released backlog is queued behind fresh work (sql/005-accept-job.sql).
-- sql/ creates it anew with that parameter; the old signature goes, or a call with four
-- arguments could mean either.
drop function if exists enqueue_delivery_messages(text, bigint[], integer[], timestamptz[]);

-- Down Migration
-- Forward-only: migrations are never rolled back in production.
