-- PUSH: dedupe, store and enqueue requests in one transaction; queued: for each, true if queued, false if
-- its fingerprint's key was seen (p_filter false: dont_filter, queued whatever was seen; its key is marked
-- seen). best_priority, best_rank: the best (priority, rank) queued ready now (NULL: none), which a client's
-- bound for its pops must not be below (pop.sql).
CREATE OR REPLACE FUNCTION push(p_hosts text[], p_keys bigint[], p_filter boolean[], p_priorities integer[],
                                p_attempts integer[], p_fps bytea[], p_not_befores double precision[],
                                p_records bytea[], p_fifo boolean,
                                OUT queued boolean[], OUT best_priority integer, OUT best_rank bigint)
LANGUAGE plpgsql AS $$
DECLARE
    total integer := coalesce(array_length(p_records, 1), 0);
    out boolean[] := array_fill(false, ARRAY[total]);
    now_ double precision := now_s();
    rank bigint;
    i integer;
    h integer;
    fresh boolean;
    new_seen integer := 0;
    done_n integer := 0;
    places bigint[];
BEGIN
    -- places in the order given; the rows are then written host by host (the order every step locks hosts in)
    places := ARRAY(SELECT nextval('places') FROM generate_series(1, total));
    FOR i IN SELECT t.o FROM unnest(p_hosts) WITH ORDINALITY AS t(name, o) ORDER BY t.name, t.o LOOP
        INSERT INTO seen (key) VALUES (p_keys[i]) ON CONFLICT DO NOTHING;
        fresh := FOUND;
        IF fresh THEN
            new_seen := new_seen + 1;
        ELSIF p_filter[i] THEN
            CONTINUE;
        END IF;
        h := host_id(p_hosts[i]);
        PERFORM put(h, places[i], p_priorities[i], p_attempts[i], NOT p_filter[i], p_fps[i],
                    p_not_befores[i], p_records[i], p_not_befores[i], p_fifo);
        out[i] := true;
        done_n := done_n + 1;
        IF p_not_befores[i] IS NULL OR p_not_befores[i] <= now_ THEN
            rank := CASE WHEN p_fifo THEN -places[i] ELSE places[i] END;
            IF best_priority IS NULL OR (p_priorities[i], rank) > (best_priority, best_rank) THEN
                best_priority := p_priorities[i];
                best_rank := rank;
            END IF;
        END IF;
    END LOOP;
    PERFORM bump(ARRAY['duplicates', 'pushed', 'seen'],
                 ARRAY[(total - done_n)::double precision, done_n, new_seen]);
    queued := out;
END $$;

-- MARK_SEEN: add keys to the seen set; how many were new.
CREATE OR REPLACE FUNCTION mark_seen(p_keys bigint[]) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    n integer;
BEGIN
    WITH added AS (
        INSERT INTO seen (key) SELECT DISTINCT k FROM unnest(p_keys) AS t(k) ORDER BY k
        ON CONFLICT DO NOTHING RETURNING 1)
    SELECT count(*) INTO n FROM added;
    PERFORM bump(ARRAY['seen'], ARRAY[n::double precision]);
    RETURN n;
END $$;
