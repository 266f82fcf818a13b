-- PAUSE: hand out nothing until a resume (p_on false); a pause keeps the time it began.
CREATE OR REPLACE FUNCTION set_paused(p_on boolean) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    IF p_on THEN
        UPDATE meta SET value = to_jsonb(now_s()) WHERE name = 'paused_since' AND value = 'null'::jsonb;
    ELSE
        UPDATE meta SET value = 'null'::jsonb WHERE name = 'paused_since';
    END IF;
END $$;

-- DROP_IDS: remove pending requests (ready or waiting) by id; their hosts are locked first (by id), so
-- that a pop of the same host skips it meanwhile. How many were removed.
CREATE OR REPLACE FUNCTION drop_ids(p_ids bigint[]) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    g record;
    n integer := 0;
BEGIN
    PERFORM 1 FROM hosts x
     WHERE x.id IN (SELECT q.host FROM requests q WHERE q.id = ANY(p_ids)
                    UNION SELECT w.host FROM waiting w WHERE w.id = ANY(p_ids))
     ORDER BY x.id FOR UPDATE;
    FOR g IN
        WITH gone AS (DELETE FROM requests WHERE id = ANY(p_ids) RETURNING host)
        SELECT host, count(*) AS c FROM gone GROUP BY host ORDER BY host
    LOOP
        UPDATE hosts SET ready_n = ready_n - g.c WHERE id = g.host;
        PERFORM refresh_top(g.host);
        n := n + g.c;
    END LOOP;
    FOR g IN
        WITH gone AS (DELETE FROM waiting WHERE id = ANY(p_ids) RETURNING host)
        SELECT host, count(*) AS c FROM gone GROUP BY host ORDER BY host
    LOOP
        UPDATE hosts SET waiting_n = waiting_n - g.c WHERE id = g.host;
        n := n + g.c;
    END LOOP;
    PERFORM bump(ARRAY['dropped'], ARRAY[n::double precision]);
    RETURN n;
END $$;

-- Every client says it is there (BEAT), with the leases it renews for p_seconds: per lease 1, or 0 if lost; and
-- the counters' rows are folded into their sums.
CREATE OR REPLACE FUNCTION beat(p_client text, p_info jsonb, p_ids bigint[], p_lease_nos bigint[],
                                p_seconds double precision) RETURNS integer[]
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO clients (id, info, seen_at) VALUES (p_client, p_info, now_s())
    ON CONFLICT (id) DO UPDATE SET seen_at = excluded.seen_at;
    PERFORM fold_counters();
    RETURN finish('extend', p_ids, p_lease_nos, p_seconds, NULL, NULL, NULL, NULL, false);
END $$;
