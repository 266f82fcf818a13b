-- PUSH: dedupe, store and enqueue requests in one transaction; for each, true if queued, false if its
-- fingerprint's key was seen (a NULL key: dont_filter, queued whatever was seen; its key is marked seen).
CREATE OR REPLACE FUNCTION push(p_hosts text[], p_keys bigint[], p_filter boolean[], p_priorities integer[],
                                p_attempts integer[], p_fps bytea[], p_not_befores double precision[],
                                p_records bytea[], p_fifo boolean) RETURNS boolean[]
LANGUAGE plpgsql AS $$
DECLARE
    total integer := coalesce(array_length(p_records, 1), 0);
    out boolean[] := array_fill(false, ARRAY[total]);
    i integer;
    h integer;
    fresh boolean;
    new_seen integer := 0;
    queued integer := 0;
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
        queued := queued + 1;
    END LOOP;
    PERFORM bump(ARRAY['duplicates', 'pushed', 'seen'],
                 ARRAY[(total - queued)::double precision, queued, new_seen]);
    RETURN out;
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
