-- REQUEUE_FAILED: failed requests pending again (attempts 0, ready now, at new places), oldest failure
-- first; at most p_limit (NULL: all). How many.
CREATE OR REPLACE FUNCTION requeue_failed(p_limit bigint, p_fifo boolean) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    f record;
    n integer := 0;
BEGIN
    FOR f IN
        WITH taken AS (
            DELETE FROM failed WHERE seq IN (SELECT seq FROM failed ORDER BY seq LIMIT p_limit FOR UPDATE)
            RETURNING *)
        SELECT * FROM taken ORDER BY seq
    LOOP
        PERFORM put(f.host, nextval('places'), f.priority, 0, f.dont_filter, f.fingerprint, NULL, f.record, NULL,
                    p_fifo);
        n := n + 1;
    END LOOP;
    PERFORM bump(ARRAY['failed'], ARRAY[-n::double precision]);
    RETURN n;
END $$;

-- RECORD_FAILED: store requests as failed as given (copied in from elsewhere), each marked seen and counted
-- as done for its host. How many.
CREATE OR REPLACE FUNCTION record_failed(p_hosts text[], p_keys bigint[], p_priorities integer[],
                                         p_attempts integer[], p_dont_filter boolean[], p_fps bytea[],
                                         p_records bytea[], p_errors text[], p_at double precision[])
RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    total integer := coalesce(array_length(p_records, 1), 0);
    i integer;
    h integer;
    new_seen integer := 0;
BEGIN
    FOR i IN 1 .. total LOOP
        INSERT INTO seen (key) VALUES (p_keys[i]) ON CONFLICT DO NOTHING;
        IF FOUND THEN
            new_seen := new_seen + 1;
        END IF;
        h := host_id(p_hosts[i]);
        UPDATE hosts SET done = done + 1 WHERE id = h;
        INSERT INTO failed (host, priority, attempts, dont_filter, fingerprint, record, error, failed_at)
        VALUES (h, p_priorities[i], p_attempts[i], p_dont_filter[i], p_fps[i], p_records[i], p_errors[i], p_at[i]);
    END LOOP;
    PERFORM bump(ARRAY['failed', 'seen'], ARRAY[total::double precision, new_seen]);
    RETURN total;
END $$;
