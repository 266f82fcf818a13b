-- PUSH: dedupe, store and enqueue requests in one transaction; queued: for each, true if queued, false if
-- its fingerprint's key was seen (p_filter false: dont_filter, queued whatever was seen, and the seen set left
-- as it is, as every backend leaves it). best_priority, best_rank: the best (priority, rank) queued ready now (NULL: none), which a client's
-- bound for its pops must not be below (pop.sql).
CREATE OR REPLACE FUNCTION push(p_hosts text[], p_keys bigint[], p_filter boolean[], p_priorities integer[],
                                p_attempts integer[], p_fps bytea[], p_not_befores double precision[],
                                p_records bytea[], p_fifo boolean,
                                OUT queued boolean[], OUT best_priority integer, OUT best_rank bigint)
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
DECLARE
    total integer := coalesce(array_length(p_records, 1), 0);
    now_ double precision := now_s();
    places bigint[];
    fresh_keys bigint[];
    kept integer[];
    host_ids integer[];
    host_names text[];
    at bigint;
    fresh boolean;
BEGIN
    queued := array_fill(false, ARRAY[total]);
    IF total = 0 THEN
        RETURN;
    END IF;
    IF total = 1 THEN  -- one request, in plain statements (cheaper than the set statements' setup)
        fresh := false;
        IF p_filter[1] THEN
            INSERT INTO seen (key) VALUES (p_keys[1]) ON CONFLICT DO NOTHING;
            fresh := FOUND;
        END IF;
        IF fresh OR NOT p_filter[1] THEN
            at := nextval('places');
            PERFORM put(host_id(p_hosts[1]), at, p_priorities[1], p_attempts[1], NOT p_filter[1], p_fps[1],
                        p_not_befores[1], p_records[1], p_not_befores[1], p_fifo);
            queued[1] := true;
            IF p_not_befores[1] IS NULL OR p_not_befores[1] <= now_ THEN
                best_priority := p_priorities[1];
                best_rank := CASE WHEN p_fifo THEN -at ELSE at END;
            END IF;
        END IF;
        PERFORM bump(ARRAY['duplicates', 'pushed', 'seen'],
                     ARRAY[CASE WHEN queued[1] THEN 0 ELSE 1 END, CASE WHEN queued[1] THEN 1 ELSE 0 END,
                           CASE WHEN fresh THEN 1 ELSE 0 END]::double precision[]);
        RETURN;
    END IF;
    -- places in the order given (a request's id, and its rank by the crawl's order)
    places := ARRAY(SELECT nextval('places') FROM generate_series(1, total));
    -- the keys of the rows filtered that are new to the seen set, marked seen (in key order: the order every
    -- step takes seen keys in)
    WITH added AS (
        INSERT INTO seen (key) SELECT DISTINCT t.k FROM unnest(p_keys, p_filter) AS t(k, f) WHERE t.f ORDER BY t.k
        ON CONFLICT DO NOTHING RETURNING key)
    SELECT coalesce(array_agg(a.key), '{}') INTO fresh_keys FROM added a;
    -- the rows queued: every dont_filter row, and the first filtered row of each new key (host by host, in the
    -- order given)
    SELECT coalesce(array_agg(g.o::integer ORDER BY g.o), '{}') INTO kept
      FROM (SELECT t.o, t.f, f.k IS NOT NULL AS fresh,
                   row_number() OVER (PARTITION BY t.k, t.f ORDER BY t.h, t.o) AS nth
              FROM unnest(p_hosts, p_keys, p_filter) WITH ORDINALITY AS t(h, k, f, o)
              LEFT JOIN unnest(fresh_keys) AS f(k) ON f.k = t.k) g
     WHERE NOT g.f OR (g.fresh AND g.nth = 1);
    IF cardinality(kept) > 0 THEN
        -- their hosts, made if new, then locked in id order (the order every step locks hosts in)
        INSERT INTO hosts (name)  -- only names not there: an insert that meets its conflict still uses up an id
        SELECT u.name FROM (SELECT DISTINCT p_hosts[i] AS name FROM unnest(kept) AS i) u
         WHERE NOT EXISTS (SELECT 1 FROM hosts y WHERE y.name = u.name)
         ORDER BY u.name
        ON CONFLICT (name) DO NOTHING;
        SELECT array_agg(x.id ORDER BY x.id), array_agg(x.name ORDER BY x.id) INTO host_ids, host_names
          FROM (SELECT y.id, y.name FROM hosts y
                 WHERE y.name = ANY (ARRAY(SELECT DISTINCT p_hosts[i] FROM unnest(kept) AS i))
                 ORDER BY y.id FOR UPDATE) x;
        -- each in its host's queue, or waiting for its time
        WITH rows_ AS (
            SELECT i, hm.id AS host, CASE WHEN p_fifo THEN -places[i] ELSE places[i] END AS rank,
                   p_not_befores[i] IS NULL OR p_not_befores[i] <= now_ AS ready
              FROM unnest(kept) AS i JOIN unnest(host_ids, host_names) AS hm(id, name) ON hm.name = p_hosts[i]),
        ready_rows AS (
            INSERT INTO requests (id, host, priority, rank, attempts, dont_filter, fingerprint, not_before, record)
            SELECT places[r.i], r.host, p_priorities[r.i], r.rank, p_attempts[r.i], NOT p_filter[r.i], p_fps[r.i],
                   p_not_befores[r.i], p_records[r.i]
              FROM rows_ r WHERE r.ready
            RETURNING 1),
        later_rows AS (
            INSERT INTO waiting (id, host, due, priority, attempts, dont_filter, fingerprint, not_before, record)
            SELECT places[r.i], r.host, p_not_befores[r.i], p_priorities[r.i], p_attempts[r.i], NOT p_filter[r.i],
                   p_fps[r.i], p_not_befores[r.i], p_records[r.i]
              FROM rows_ r WHERE NOT r.ready
            RETURNING 1),
        per_host AS (  -- each host's count of each, and its best ready row
            SELECT r.host, count(*) FILTER (WHERE r.ready) AS ready_n, count(*) FILTER (WHERE NOT r.ready) AS waiting_n,
                   (array_agg(p_priorities[r.i] ORDER BY p_priorities[r.i] DESC, r.rank DESC)
                        FILTER (WHERE r.ready))[1] AS top_priority,
                   (array_agg(r.rank ORDER BY p_priorities[r.i] DESC, r.rank DESC) FILTER (WHERE r.ready))[1] AS top_rank
              FROM rows_ r GROUP BY r.host),
        changed AS (
            UPDATE hosts x
               SET ready_n = x.ready_n + c.ready_n, waiting_n = x.waiting_n + c.waiting_n,
                   top_priority = CASE WHEN c.ready_n > 0 AND (x.ready_n = 0 OR (c.top_priority, c.top_rank) >
                                       (x.top_priority, x.top_rank)) THEN c.top_priority ELSE x.top_priority END,
                   top_rank = CASE WHEN c.ready_n > 0 AND (x.ready_n = 0 OR (c.top_priority, c.top_rank) >
                                   (x.top_priority, x.top_rank)) THEN c.top_rank ELSE x.top_rank END
              FROM per_host c WHERE x.id = c.host
            RETURNING 1)
        SELECT c.top_priority, c.top_rank INTO best_priority, best_rank  -- (each insert and update runs whole)
          FROM per_host c WHERE c.ready_n > 0 ORDER BY c.top_priority DESC, c.top_rank DESC LIMIT 1;
        FOREACH at IN ARRAY kept::bigint[] LOOP
            queued[at] := true;
        END LOOP;
    END IF;
    PERFORM bump(ARRAY['duplicates', 'pushed', 'seen'],
                 ARRAY[(total - cardinality(kept))::double precision, cardinality(kept), cardinality(fresh_keys)]);
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
