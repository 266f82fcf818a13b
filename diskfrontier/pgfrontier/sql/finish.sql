-- FINISH: end or renew leases. p_kind: 'done', 'refetch' (done, and the request waits p_seconds to come
-- back with p_records[i], attempts 0), 'retry' (pending again after p_seconds with p_records[i] and
-- p_attempts[i]), 'fail' (kept in "failed" with p_errors[i]), 'release' (pending again now, at a new
-- place, in the order they were handed out), 'extend' (the lease runs out p_seconds from now).
-- Per request 1, or 0 if its lease (id, lease_no) is not there: it ran out and was taken back.
-- p_counters[i]: counters (comma-separated) a request finished here adds one to.
CREATE OR REPLACE FUNCTION finish(p_kind text, p_ids bigint[], p_lease_nos bigint[], p_seconds double precision,
                                  p_records bytea[], p_attempts integer[], p_errors text[], p_counters text[],
                                  p_fifo boolean) RETURNS integer[]
LANGUAGE plpgsql AS $$
DECLARE
    total integer := coalesce(array_length(p_ids, 1), 0);
    out integer[] := array_fill(0, ARRAY[total]);
    now_ double precision := now_s();
    i integer;
    l record;
    ok integer := 0;
    names text[] := '{}';
    places integer[];
    host_ids integer[];
    host_counts bigint[];
    one_host integer;
BEGIN
    IF p_kind = 'extend' THEN
        FOR i IN SELECT t.o FROM unnest(p_ids) WITH ORDINALITY AS t(v, o) ORDER BY t.v LOOP
            UPDATE leases SET expires = now_ + p_seconds WHERE id = p_ids[i] AND lease_no = p_lease_nos[i];
            IF FOUND THEN
                out[i] := 1;
            END IF;
        END LOOP;
        RETURN out;
    END IF;
    IF p_kind = 'done' AND p_counters IS NULL AND total = 1 THEN  -- one done, in plain statements
        DELETE FROM leases x WHERE x.id = p_ids[1] AND x.lease_no = p_lease_nos[1] RETURNING x.host INTO one_host;
        IF FOUND THEN
            UPDATE hosts SET in_flight = in_flight - 1, done = done + 1, failures = 0 WHERE id = one_host;
            PERFORM bump(ARRAY['done'], ARRAY[1::double precision]);
            out[1] := 1;
        END IF;
        RETURN out;
    END IF;
    IF p_kind = 'done' AND p_counters IS NULL THEN
        -- dones (the common end): the leases ended in one statement, their hosts locked in the order every step
        -- locks them in, then each host's row changed once, in one statement
        WITH gone AS (
            DELETE FROM leases x USING unnest(p_ids, p_lease_nos) WITH ORDINALITY AS t(v, n, o)
             WHERE x.id = t.v AND x.lease_no = t.n
            RETURNING x.host, t.o),
        ended AS (SELECT coalesce(array_agg(g.o), '{}') AS os FROM gone g),
        per_host AS (SELECT coalesce(array_agg(c.host ORDER BY c.host), '{}') AS hs,
                            coalesce(array_agg(c.n ORDER BY c.host), '{}') AS ns
                       FROM (SELECT g.host, count(*) AS n FROM gone g GROUP BY g.host) c)
        SELECT e.os, p.hs, p.ns INTO places, host_ids, host_counts FROM ended e, per_host p;
        ok := cardinality(places);
        IF cardinality(host_ids) > 1 THEN
            PERFORM 1 FROM hosts x WHERE x.id = ANY (host_ids) ORDER BY x.id FOR UPDATE;
        END IF;
        UPDATE hosts x SET in_flight = x.in_flight - u.n, done = x.done + u.n, failures = 0
          FROM unnest(host_ids, host_counts) AS u(h, n) WHERE x.id = u.h;
        FOREACH i IN ARRAY places LOOP
            out[i] := 1;
        END LOOP;
        IF ok > 0 THEN
            PERFORM bump(ARRAY['done'], ARRAY[ok::double precision]);
        END IF;
        RETURN out;
    END IF;
    -- the leases ended, in one statement; then each host's row changed in the order every step locks them in
    FOR l IN
        WITH gone AS (
            DELETE FROM leases x USING unnest(p_ids, p_lease_nos) WITH ORDINALITY AS t(v, n, o)
             WHERE x.id = t.v AND x.lease_no = t.n
            RETURNING x.*, t.o)
        SELECT * FROM gone g ORDER BY CASE WHEN p_kind = 'release' THEN g.lease_no END, g.host, g.o
    LOOP
        i := l.o;
        out[i] := 1;
        ok := ok + 1;
        IF p_counters IS NOT NULL AND p_counters[i] <> '' THEN
            names := names || string_to_array(p_counters[i], ',');
        END IF;
        IF p_kind IN ('done', 'refetch') THEN
            UPDATE hosts SET in_flight = in_flight - 1, done = done + 1, failures = 0 WHERE id = l.host;
            IF p_kind = 'refetch' THEN
                PERFORM put(l.host, nextval('places'), l.priority, 0, l.dont_filter, l.fingerprint,
                            now_ + p_seconds, p_records[i], now_ + p_seconds, p_fifo);
            END IF;
        ELSIF p_kind = 'fail' THEN
            UPDATE hosts SET in_flight = in_flight - 1, done = done + 1 WHERE id = l.host;
            INSERT INTO failed (host, priority, attempts, dont_filter, fingerprint, record, error, failed_at)
            VALUES (l.host, l.priority, l.attempts, l.dont_filter, l.fingerprint, l.record, p_errors[i], now_);
        ELSIF p_kind = 'retry' THEN
            UPDATE hosts SET in_flight = in_flight - 1 WHERE id = l.host;
            PERFORM put(l.host, nextval('places'), l.priority, p_attempts[i], l.dont_filter, l.fingerprint,
                        CASE WHEN p_seconds > 0 THEN now_ + p_seconds END, p_records[i],
                        CASE WHEN p_seconds > 0 THEN now_ + p_seconds END, p_fifo);
        ELSIF p_kind = 'release' THEN
            UPDATE hosts SET in_flight = in_flight - 1 WHERE id = l.host;
            PERFORM put(l.host, nextval('places'), l.priority, l.attempts, l.dont_filter, l.fingerprint,
                        l.not_before, l.record, NULL, p_fifo);
        ELSE
            RAISE EXCEPTION 'finish(): unknown kind %', p_kind;
        END IF;
    END LOOP;
    IF ok > 0 THEN
        PERFORM bump(names || ARRAY[CASE p_kind WHEN 'fail' THEN 'failed' WHEN 'retry' THEN 'retried'
                                                WHEN 'release' THEN 'released' ELSE 'done' END]
                           || CASE WHEN p_kind = 'refetch' THEN ARRAY['refetch_scheduled'] ELSE '{}' END,
                     array_fill(1::double precision, ARRAY[cardinality(names)]) || ARRAY[ok::double precision]
                           || CASE WHEN p_kind = 'refetch' THEN ARRAY[ok::double precision] ELSE '{}' END);
    END IF;
    RETURN out;
END $$;
