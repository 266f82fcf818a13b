-- Helpers the steps call: the server's clock, counters, a host's row, and a request put in its place.
-- Every step takes host rows in one order where it can (by id) and adds to its counters last, so that
-- steps running at once wait for each other without a cycle.

CREATE OR REPLACE FUNCTION now_s() RETURNS double precision
LANGUAGE sql VOLATILE AS $$ SELECT extract(epoch FROM clock_timestamp())::double precision $$;

-- The crawl's delay and per-host limit, as any client last set them.
CREATE OR REPLACE FUNCTION setting_delay() RETURNS double precision
LANGUAGE sql STABLE AS $$ SELECT (value #>> '{}')::double precision FROM meta WHERE name = 'delay' $$;

CREATE OR REPLACE FUNCTION setting_per_host() RETURNS integer
LANGUAGE sql STABLE AS $$ SELECT (value #>> '{}')::integer FROM meta WHERE name = 'per_host' $$;

-- Add p_values to the counters p_names: rows inserted, none changed (tables.sql). In plpgsql, so that the
-- INSERT's plan is made once a connection (a LANGUAGE sql function that is not inlined plans its body again
-- at every call).
CREATE OR REPLACE FUNCTION bump(p_names text[], p_values double precision[]) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO counters (name, part, value)
    SELECT t.n, (pg_backend_pid() % 16)::smallint, sum(t.v)
      FROM unnest(p_names, p_values) AS t(n, v)
     WHERE t.v <> 0
     GROUP BY t.n;
END $$;

-- Replace the counters' rows by one row a counter, their sum; how many rows were folded. Two folds at once
-- each take the rows the other did not (a row is deleted once): the sums stay whole.
CREATE OR REPLACE FUNCTION fold_counters() RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    n integer;
BEGIN
    WITH gone AS (DELETE FROM counters RETURNING name, value),
         summed AS (INSERT INTO counters (name, part, value)
                    SELECT g.name, 0, sum(g.value) FROM gone g GROUP BY g.name)
    SELECT count(*) INTO n FROM gone;
    RETURN n;
END $$;

-- The id of host p_name, made if it is new.
CREATE OR REPLACE FUNCTION host_id(p_name text) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    h integer;
BEGIN
    SELECT id INTO h FROM hosts WHERE name = p_name;
    IF h IS NULL THEN
        INSERT INTO hosts (name) VALUES (p_name) ON CONFLICT (name) DO NOTHING RETURNING id INTO h;
        IF h IS NULL THEN
            SELECT id INTO h FROM hosts WHERE name = p_name;
        END IF;
    END IF;
    RETURN h;
END $$;

-- Set a host's best ready request again from its queue (after requests left it other than by a pop).
CREATE OR REPLACE FUNCTION refresh_top(p_host integer) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    p integer;
    r bigint;
BEGIN
    SELECT q.priority, q.rank INTO p, r FROM requests q WHERE q.host = p_host
     ORDER BY q.priority DESC, q.rank DESC LIMIT 1;
    UPDATE hosts SET top_priority = coalesce(p, 0), top_rank = coalesce(r, 0) WHERE id = p_host;
END $$;

-- Put a request in its host's queue (p_due in the past or NULL) or among those waiting for a time.
-- p_rank: its rank if it keeps one (a lease taken back), else NULL (its id's, by the crawl's order).
CREATE OR REPLACE FUNCTION put(p_host integer, p_id bigint, p_priority integer, p_attempts integer,
                               p_dont_filter boolean, p_fp bytea, p_not_before double precision, p_record bytea,
                               p_due double precision, p_fifo boolean, p_rank bigint DEFAULT NULL) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    r bigint := coalesce(p_rank, CASE WHEN p_fifo THEN -p_id ELSE p_id END);
BEGIN
    IF p_due IS NOT NULL AND p_due > now_s() THEN
        INSERT INTO waiting (id, host, due, priority, attempts, dont_filter, fingerprint, not_before, record)
        VALUES (p_id, p_host, p_due, p_priority, p_attempts, p_dont_filter, p_fp, p_not_before, p_record);
        UPDATE hosts SET waiting_n = waiting_n + 1 WHERE id = p_host;
        RETURN;
    END IF;
    INSERT INTO requests (id, host, priority, rank, attempts, dont_filter, fingerprint, not_before, record)
    VALUES (p_id, p_host, p_priority, r, p_attempts, p_dont_filter, p_fp, p_not_before, p_record);
    UPDATE hosts
       SET ready_n = ready_n + 1,
           top_priority = CASE WHEN ready_n = 0 OR (p_priority, r) > (top_priority, top_rank)
                               THEN p_priority ELSE top_priority END,
           top_rank = CASE WHEN ready_n = 0 OR (p_priority, r) > (top_priority, top_rank)
                           THEN r ELSE top_rank END
     WHERE id = p_host;
END $$;

-- Requests waiting for a time that is past join their hosts' queues (at most p_limit of them).
CREATE OR REPLACE FUNCTION wake(p_fifo boolean, p_limit integer) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    w record;
    n integer := 0;
BEGIN
    FOR w IN
        WITH due AS (
            DELETE FROM waiting WHERE id IN (
                SELECT id FROM waiting WHERE due <= now_s() ORDER BY due LIMIT p_limit FOR UPDATE SKIP LOCKED)
            RETURNING *)
        SELECT * FROM due ORDER BY host, due
    LOOP
        UPDATE hosts SET waiting_n = waiting_n - 1 WHERE id = w.host;
        PERFORM put(w.host, w.id, w.priority, w.attempts, w.dont_filter, w.fingerprint, w.not_before, w.record,
                    NULL, p_fifo);
        n := n + 1;
    END LOOP;
    RETURN n;
END $$;

-- Leases that ran out give their requests back, at their old places (at most p_limit of them).
CREATE OR REPLACE FUNCTION reclaim(p_fifo boolean, p_limit integer) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    l record;
    n integer := 0;
BEGIN
    FOR l IN
        WITH gone AS (
            DELETE FROM leases WHERE id IN (
                SELECT id FROM leases WHERE expires < now_s() ORDER BY expires LIMIT p_limit FOR UPDATE SKIP LOCKED)
            RETURNING *)
        SELECT * FROM gone ORDER BY host, lease_no
    LOOP
        UPDATE hosts SET in_flight = in_flight - 1 WHERE id = l.host;
        PERFORM put(l.host, l.id, l.priority, l.attempts, l.dont_filter, l.fingerprint, l.not_before, l.record,
                    NULL, p_fifo, l.rank);
        n := n + 1;
    END LOOP;
    IF n > 0 THEN
        PERFORM bump(ARRAY['reclaimed'], ARRAY[n::double precision]);
    END IF;
    RETURN n;
END $$;
