-- POP: up to p_count requests, each leased to p_client for p_lease seconds. A host is taken with
-- FOR UPDATE SKIP LOCKED (pops at once take different hosts, and none waits for another), its best
-- request moved to the leases, and its last hand-out set, so that its delay holds for every client;
-- no lock is held once the transaction ends. Nothing while the crawl is paused.
--
-- Rows a pop or a done changes leave dead entries in the indexes for as long as a long transaction holds
-- vacuum back, in front of the live ones; a pop reads from bounds that pass over them:
-- * p_bound_priority, p_bound_rank (NULL: none): no host of a better (top_priority, top_rank) may be taken:
--   what the client's last pop took. The client drops the bound when it may no longer hold (its own pushes
--   of better requests raise it, a change that frees hosts drops it, and it is dropped a few times a
--   second and when a host held back by time, better than the bound, becomes ready: recheck_at); requests
--   woken or taken back by this pop drop it too. A pop that finds nothing from the bound looks from the
--   front once.
-- * a host's queue is read from the host's best request, the next best from below the one taken.
-- * p_maintain: first take back leases that ran out and wake requests whose time came (asked a few times a
--   second: both read the front of an index).
-- Each row returned also says the bound after it (the key taken) and recheck_at (server time; NULL: none).
-- p_done_ids, p_done_nos (NULL: none): leases this client finished since its last step (a done riding on the
-- pop), ended first as finish('done', ...) ends them; then the first row returned has a NULL id and done_acks,
-- finish's answer for them.
CREATE OR REPLACE FUNCTION pop(p_client text, p_count integer, p_lease double precision, p_fifo boolean,
                               p_maintain boolean, p_bound_priority integer, p_bound_rank bigint,
                               p_done_ids bigint[], p_done_nos bigint[])
RETURNS TABLE (id bigint, lease_no bigint, host text, priority integer, attempts integer, dont_filter boolean,
               fingerprint bytea, not_before double precision, record bytea, bound_priority integer,
               bound_rank bigint, recheck_at double precision, done_acks integer[])
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    now_ double precision := now_s();
    crawl_delay double precision;
    crawl_per_host integer;
    paused boolean;
    h record;
    r record;
    n integer := 0;
    bp integer := p_bound_priority;
    br bigint := p_bound_rank;
    from_bound boolean;
    recheck double precision := NULL;
    -- the hosts of one round: locked, best first
    h_ids integer[];
    h_names text[];
    h_tops integer[];
    h_ranks bigint[];
    h_tids tid[];
    h_allows bigint[];
    want integer;
    got integer;
    c refcursor;
    attempt integer;
    t record;
    l bigint;
    next_priority integer;
    next_rank bigint;
    low_priority integer;
    low_rank bigint;
    -- The best ready hosts (from a bound, or from the front), locked as they are read. Cursors without a LIMIT,
    -- read row by row: their cached plans read the hosts' order from its index whatever the plan cache
    -- estimates of the filters (a generic plan of "ORDER BY ... LIMIT k" under those estimates read every host
    -- and sorted them).
    bounded CURSOR (b_priority integer, b_rank bigint, t double precision, d double precision, ph integer) FOR
        SELECT x.id, x.name, x.top_priority, x.top_rank, x.ctid AS tid,
               CASE WHEN coalesce(x.delay, d) > 0 THEN 1
                    ELSE least(CASE WHEN ph > 0 THEN ph - x.in_flight END, x.budget - x.done - x.in_flight) END AS allow
          FROM hosts x
         WHERE x.ready_n > 0 AND (x.top_priority, x.top_rank) <= (b_priority, b_rank)
           AND x.last_out + coalesce(x.delay, d) <= t
           AND (x.blocked_until IS NULL OR x.blocked_until <= t)
           AND (ph = 0 OR x.in_flight < ph)
           AND (x.budget IS NULL OR x.done + x.in_flight < x.budget)
         ORDER BY x.top_priority DESC, x.top_rank DESC
         FOR UPDATE SKIP LOCKED;
    front CURSOR (t double precision, d double precision, ph integer) FOR
        SELECT x.id, x.name, x.top_priority, x.top_rank, x.ctid AS tid,
               CASE WHEN coalesce(x.delay, d) > 0 THEN 1
                    ELSE least(CASE WHEN ph > 0 THEN ph - x.in_flight END, x.budget - x.done - x.in_flight) END AS allow
          FROM hosts x
         WHERE x.ready_n > 0
           AND x.last_out + coalesce(x.delay, d) <= t
           AND (x.blocked_until IS NULL OR x.blocked_until <= t)
           AND (ph = 0 OR x.in_flight < ph)
           AND (x.budget IS NULL OR x.done + x.in_flight < x.budget)
         ORDER BY x.top_priority DESC, x.top_rank DESC
         FOR UPDATE SKIP LOCKED;
BEGIN
    IF p_done_ids IS NOT NULL THEN  -- the dones first, whatever the pop finds (a paused crawl takes them too)
        done_acks := finish('done', p_done_ids, p_done_nos, 0, NULL, NULL, NULL, NULL, p_fifo);
        RETURN NEXT;
        done_acks := NULL;
    END IF;
    -- the crawl's settings and whether it is paused, in one read
    SELECT (max(m.value #>> '{}') FILTER (WHERE m.name = 'delay'))::double precision,
           (max(m.value #>> '{}') FILTER (WHERE m.name = 'per_host'))::integer,
           coalesce(bool_or(m.value <> 'null'::jsonb) FILTER (WHERE m.name = 'paused_since'), false)
      INTO crawl_delay, crawl_per_host, paused
      FROM meta m WHERE m.name IN ('delay', 'per_host', 'paused_since');
    IF paused THEN
        RETURN;
    END IF;
    IF p_maintain AND reclaim(p_fifo, 100) + wake(p_fifo, 100) > 0 THEN
        bp := NULL;  -- requests came back to their hosts' queues: maybe in front of the bound
        br := NULL;
    END IF;
    -- Rounds: each reads up to k of the best ready hosts (k: the requests still wanted) and takes the k best
    -- requests of their queues, in one statement: one a host held back by a delay, as many as its limits allow
    -- of one that has none. The k best requests of all are in the queues of those k hosts (each host's top is
    -- one of k candidates at least as good as the k-th host's top), so they go out in the order one request at
    -- a time would give them. A second round is for a pop from a bound that found fewer than k hosts.
    WHILE n < p_count LOOP
        want := p_count - n;
        h_ids := '{}'; h_names := '{}'; h_tops := '{}'; h_ranks := '{}'; h_tids := '{}'; h_allows := '{}';
        FOR attempt IN 1..2 LOOP  -- from the bound; with none, or nothing from it, from the front
            from_bound := attempt = 1;
            CONTINUE WHEN from_bound AND bp IS NULL;
            IF from_bound THEN
                OPEN bounded(bp, br, now_, crawl_delay, crawl_per_host);
                c := bounded;
            ELSE
                OPEN front(now_, crawl_delay, crawl_per_host);
                c := front;
            END IF;
            LOOP
                FETCH c INTO h;
                EXIT WHEN NOT FOUND;
                h_ids := h_ids || h.id; h_names := h_names || h.name; h_tids := h_tids || h.tid;
                h_tops := h_tops || h.top_priority; h_ranks := h_ranks || h.top_rank; h_allows := h_allows || h.allow;
                EXIT WHEN cardinality(h_ids) >= want;
            END LOOP;
            CLOSE c;
            EXIT WHEN cardinality(h_ids) > 0;
        END LOOP;
        EXIT WHEN cardinality(h_ids) = 0;
        -- the hosts passed over, in front of the last one read, that time holds back: when the first is ready
        -- (two statements: each reads only its range of the hosts' order)
        IF from_bound THEN
            recheck := least(recheck, (
                SELECT min(greatest(x.last_out + coalesce(x.delay, crawl_delay), coalesce(x.blocked_until, 0)))
                  FROM hosts x
                 WHERE x.ready_n > 0 AND (x.top_priority, x.top_rank) <= (bp, br)
                   AND (x.top_priority, x.top_rank) > (h_tops[cardinality(h_ids)], h_ranks[cardinality(h_ids)])
                   AND x.id <> ALL (h_ids)
                   AND (x.blocked_until IS NULL OR x.blocked_until < 'Infinity')));
        ELSE
            recheck := least(recheck, (
                SELECT min(greatest(x.last_out + coalesce(x.delay, crawl_delay), coalesce(x.blocked_until, 0)))
                  FROM hosts x
                 WHERE x.ready_n > 0
                   AND (x.top_priority, x.top_rank) > (h_tops[cardinality(h_ids)], h_ranks[cardinality(h_ids)])
                   AND x.id <> ALL (h_ids)
                   AND (x.blocked_until IS NULL OR x.blocked_until < 'Infinity')));
        END IF;
        got := 0;
        IF want = 1 THEN  -- one request, the host's top, in plain statements (cheaper than the set statement's setup)
            DELETE FROM requests q WHERE q.id = (
                SELECT y.id FROM requests y
                 WHERE y.host = h_ids[1] AND (y.priority, y.rank) <= (h_tops[1], h_ranks[1])
                 ORDER BY y.priority DESC, y.rank DESC LIMIT 1)
            RETURNING q.* INTO t;
            IF FOUND THEN
                l := nextval('lease_nos');
                INSERT INTO leases (id, lease_no, client, expires, host, priority, rank, attempts, dont_filter,
                                    fingerprint, not_before, record)
                VALUES (t.id, l, p_client, now_ + p_lease, t.host, t.priority, t.rank, t.attempts, t.dont_filter,
                        t.fingerprint, t.not_before, t.record);
                SELECT y.priority, y.rank INTO next_priority, next_rank FROM requests y
                 WHERE y.host = h_ids[1] AND (y.priority, y.rank) < (t.priority, t.rank)
                 ORDER BY y.priority DESC, y.rank DESC LIMIT 1;
                UPDATE hosts x
                   SET ready_n = x.ready_n - 1, in_flight = x.in_flight + 1, last_out = now_,
                       top_priority = coalesce(next_priority, 0), top_rank = coalesce(next_rank, 0)
                 WHERE x.ctid = h_tids[1];
                got := 1;
                bp := t.priority;
                br := t.rank;
                id := t.id; lease_no := l; host := h_names[1]; priority := t.priority; attempts := t.attempts;
                dont_filter := t.dont_filter; fingerprint := t.fingerprint; not_before := t.not_before;
                record := t.record; bound_priority := bp; bound_rank := br; recheck_at := recheck;
                RETURN NEXT;
                n := n + 1;
            END IF;
        ELSE
            IF cardinality(h_ids) = want THEN  -- the k best are no worse than the k-th host's top
                low_priority := h_tops[want];
                low_rank := h_ranks[want];
            ELSE
                low_priority := -2147483648;
                low_rank := -9223372036854775808;
            END IF;
            -- the k best requests of those hosts' queues (each read from its top, no further than the k-th host's top
            -- when there are k hosts), moved to the leases; each host's row (by its place: locked above, it has not
            -- moved) set to its next best, read from below the last one taken. Every part of the statement sees the
            -- tables as they were before it.
            FOR r IN
                WITH hs AS (
                    SELECT * FROM unnest(h_ids, h_names, h_tops, h_ranks, h_tids, h_allows)
                           AS u(hid, hname, tp, tr, htid, allow)),
                cands AS (
                    SELECT c.id AS cid, c.priority, c.rank, hs.hid, hs.hname, hs.htid
                      FROM hs CROSS JOIN LATERAL (
                          SELECT y.id, y.priority, y.rank FROM requests y
                           WHERE y.host = hs.hid AND (y.priority, y.rank) <= (hs.tp, hs.tr)
                             AND (y.priority, y.rank) >= (low_priority, low_rank)
                           ORDER BY y.priority DESC, y.rank DESC
                           LIMIT least(hs.allow, want)) c),
                pick AS (
                    SELECT * FROM cands ORDER BY priority DESC, rank DESC LIMIT want),
                taken AS (
                    DELETE FROM requests q USING pick p WHERE q.id = p.cid
                    RETURNING q.*, p.hname, p.htid),
                lows AS (  -- each host's last request taken, and how many
                    SELECT DISTINCT ON (k.host) k.host, k.htid, k.priority, k.rank,
                           count(*) OVER (PARTITION BY k.host) AS took
                      FROM taken k ORDER BY k.host, k.priority, k.rank),
                leased AS (
                    INSERT INTO leases (id, lease_no, client, expires, host, priority, rank, attempts, dont_filter,
                                        fingerprint, not_before, record)
                    SELECT k.id, nextval('lease_nos'), p_client, now_ + p_lease, k.host, k.priority, k.rank, k.attempts,
                           k.dont_filter, k.fingerprint, k.not_before, k.record
                      FROM taken k ORDER BY k.priority DESC, k.rank DESC
                    RETURNING leases.id AS lid, leases.lease_no AS lno),
                moved AS (
                    UPDATE hosts x
                       SET ready_n = x.ready_n - w.took, in_flight = x.in_flight + w.took, last_out = now_,
                           top_priority = coalesce(nx.priority, 0), top_rank = coalesce(nx.rank, 0)
                      FROM lows w
                      LEFT JOIN LATERAL (
                          SELECT y.priority, y.rank FROM requests y
                           WHERE y.host = w.host AND (y.priority, y.rank) < (w.priority, w.rank)
                           ORDER BY y.priority DESC, y.rank DESC LIMIT 1) nx ON true
                     WHERE x.ctid = w.htid
                    RETURNING x.id)
                SELECT k.id AS rid, l.lno, k.hname, k.priority AS rp, k.rank AS rr, k.attempts AS ra, k.dont_filter AS rd,
                       k.fingerprint AS rf, k.not_before AS rn, k.record AS rc,
                       (SELECT count(*) FROM moved) AS hosts_moved, (SELECT count(*) FROM lows) AS hosts_taken,
                       (SELECT hs.hname FROM hs WHERE NOT EXISTS (SELECT 1 FROM cands c WHERE c.hid = hs.hid)
                         LIMIT 1) AS empty_host
                  FROM taken k JOIN leased l ON l.lid = k.id
                 ORDER BY k.priority DESC, k.rank DESC
            LOOP
                got := got + 1;
                IF r.empty_host IS NOT NULL THEN  -- its top is the best of its queue: it is there unless damaged
                    RAISE EXCEPTION 'hosts row % counts ready requests, and the requests table holds none of it',
                        r.empty_host USING ERRCODE = 'DF001';
                END IF;
                IF r.hosts_moved <> r.hosts_taken THEN
                    RAISE EXCEPTION 'a hosts row of the pop moved or went while it was locked (%)', r.hname
                        USING ERRCODE = 'DF001';
                END IF;
                bp := r.rp;
                br := r.rr;
                id := r.rid; lease_no := r.lno; host := r.hname; priority := r.rp; attempts := r.ra;
                dont_filter := r.rd; fingerprint := r.rf; not_before := r.rn; record := r.rc;
                bound_priority := bp; bound_rank := br; recheck_at := recheck;
                RETURN NEXT;
                n := n + 1;
            END LOOP;
        END IF;
        IF got = 0 THEN  -- every host read counts ready requests: the first of them has none in its queue
            RAISE EXCEPTION 'hosts row % counts ready requests, and the requests table holds none of it',
                h_names[1] USING ERRCODE = 'DF001';
        END IF;
        -- fewer than wanted: every host in range gave what it could; only hosts in front of a bound may be left
        EXIT WHEN got < want AND NOT from_bound;
    END LOOP;
END $$;

-- NEXT_READY: when the next request may be handed out (server time; now if one may be now), or NULL if
-- none can become ready by waiting alone. A lease running out is such a time (its request comes back).
-- While paused: a quarter second from now (a resume by another client is not signalled).
CREATE OR REPLACE FUNCTION next_ready() RETURNS double precision
LANGUAGE plpgsql AS $$
DECLARE
    now_ double precision := now_s();
    crawl_delay double precision;
    crawl_per_host integer;
    paused boolean;
    best double precision;
    t double precision;
BEGIN
    SELECT (max(m.value #>> '{}') FILTER (WHERE m.name = 'delay'))::double precision,
           (max(m.value #>> '{}') FILTER (WHERE m.name = 'per_host'))::integer,
           coalesce(bool_or(m.value <> 'null'::jsonb) FILTER (WHERE m.name = 'paused_since'), false)
      INTO crawl_delay, crawl_per_host, paused
      FROM meta m WHERE m.name IN ('delay', 'per_host', 'paused_since');
    IF paused THEN
        RETURN now_ + 0.25;
    END IF;
    SELECT min(greatest(x.last_out + coalesce(x.delay, crawl_delay), coalesce(x.blocked_until, 0))) INTO best
      FROM hosts x
     WHERE x.ready_n > 0
       AND (x.blocked_until IS NULL OR x.blocked_until < 'Infinity')
       AND (crawl_per_host = 0 OR x.in_flight < crawl_per_host)
       AND (x.budget IS NULL OR x.done + x.in_flight < x.budget);
    SELECT greatest(w.due, coalesce(x.blocked_until, 0)) INTO t
      FROM waiting w JOIN hosts x ON x.id = w.host
     WHERE (x.blocked_until IS NULL OR x.blocked_until < 'Infinity')
       AND (x.budget IS NULL OR x.done + x.in_flight < x.budget)
     ORDER BY w.due LIMIT 1;
    best := least(best, t);
    SELECT min(x.expires) INTO t FROM leases x;
    best := least(best, t);
    IF best IS NULL THEN
        RETURN NULL;
    END IF;
    RETURN greatest(best, 0);
END $$;
