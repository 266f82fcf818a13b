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
CREATE OR REPLACE FUNCTION pop(p_client text, p_count integer, p_lease double precision, p_fifo boolean,
                               p_maintain boolean, p_bound_priority integer, p_bound_rank bigint)
RETURNS TABLE (id bigint, lease_no bigint, host text, priority integer, attempts integer, dont_filter boolean,
               fingerprint bytea, not_before double precision, record bytea, bound_priority integer,
               bound_rank bigint, recheck_at double precision)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    now_ double precision := now_s();
    crawl_delay double precision;
    crawl_per_host integer;
    paused boolean;
    h record;
    r record;
    l bigint;
    next_priority integer;
    next_rank bigint;
    n integer := 0;
    got boolean;
    bp integer := p_bound_priority;
    br bigint := p_bound_rank;
    recheck double precision := NULL;
    -- The best ready host (from a bound, or from the front), locked. Cursors without a LIMIT, each read for one
    -- row: their cached plans read the hosts' order from its index whatever the plan cache estimates of the
    -- filters (a generic plan of "ORDER BY ... LIMIT 1" under those estimates read every host and sorted them).
    bounded CURSOR (b_priority integer, b_rank bigint, t double precision, d double precision, ph integer) FOR
        SELECT x.id, x.name, x.top_priority, x.top_rank, x.ctid AS tid FROM hosts x
         WHERE x.ready_n > 0 AND (x.top_priority, x.top_rank) <= (b_priority, b_rank)
           AND x.last_out + coalesce(x.delay, d) <= t
           AND (x.blocked_until IS NULL OR x.blocked_until <= t)
           AND (ph = 0 OR x.in_flight < ph)
           AND (x.budget IS NULL OR x.done + x.in_flight < x.budget)
         ORDER BY x.top_priority DESC, x.top_rank DESC
         FOR UPDATE SKIP LOCKED;
    front CURSOR (t double precision, d double precision, ph integer) FOR
        SELECT x.id, x.name, x.top_priority, x.top_rank, x.ctid AS tid FROM hosts x
         WHERE x.ready_n > 0
           AND x.last_out + coalesce(x.delay, d) <= t
           AND (x.blocked_until IS NULL OR x.blocked_until <= t)
           AND (ph = 0 OR x.in_flight < ph)
           AND (x.budget IS NULL OR x.done + x.in_flight < x.budget)
         ORDER BY x.top_priority DESC, x.top_rank DESC
         FOR UPDATE SKIP LOCKED;
BEGIN
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
    WHILE n < p_count LOOP
        got := false;
        IF bp IS NOT NULL THEN
            OPEN bounded(bp, br, now_, crawl_delay, crawl_per_host);
            FETCH bounded INTO h;
            got := FOUND;
            CLOSE bounded;
            IF got THEN  -- the hosts passed over that time holds back: when the first is ready again
                recheck := least(recheck, (
                    SELECT min(greatest(x.last_out + coalesce(x.delay, crawl_delay), coalesce(x.blocked_until, 0)))
                      FROM hosts x
                     WHERE x.ready_n > 0 AND (x.top_priority, x.top_rank) <= (bp, br)
                       AND (x.top_priority, x.top_rank) > (h.top_priority, h.top_rank)
                       AND (x.blocked_until IS NULL OR x.blocked_until < 'Infinity')));
            END IF;
        END IF;
        IF NOT got THEN  -- no bound, or nothing from it: from the front
            OPEN front(now_, crawl_delay, crawl_per_host);
            FETCH front INTO h;
            got := FOUND;
            CLOSE front;
            EXIT WHEN NOT got;
            -- the hosts in front of it that time holds back: when the first of them is ready again
            recheck := least(recheck, (
                SELECT min(greatest(x.last_out + coalesce(x.delay, crawl_delay), coalesce(x.blocked_until, 0)))
                  FROM hosts x
                 WHERE x.ready_n > 0 AND (x.top_priority, x.top_rank) > (h.top_priority, h.top_rank)
                   AND (x.blocked_until IS NULL OR x.blocked_until < 'Infinity')));
        END IF;
        -- the host's best request is its top: read from there, not from the queue's front
        DELETE FROM requests q WHERE q.id = (
            SELECT y.id FROM requests y
             WHERE y.host = h.id AND (y.priority, y.rank) <= (h.top_priority, h.top_rank)
             ORDER BY y.priority DESC, y.rank DESC LIMIT 1)
        RETURNING q.* INTO r;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'hosts row % counts ready requests, and the requests table holds none of it', h.name
                USING ERRCODE = 'DF001';
        END IF;
        l := nextval('lease_nos');
        INSERT INTO leases (id, lease_no, client, expires, host, priority, rank, attempts, dont_filter, fingerprint,
                            not_before, record)
        VALUES (r.id, l, p_client, now_ + p_lease, r.host, r.priority, r.rank, r.attempts, r.dont_filter,
                r.fingerprint, r.not_before, r.record);
        -- the next best is below the one taken (which was the best): read from there
        SELECT y.priority, y.rank INTO next_priority, next_rank FROM requests y
         WHERE y.host = h.id AND (y.priority, y.rank) < (r.priority, r.rank)
         ORDER BY y.priority DESC, y.rank DESC LIMIT 1;
        UPDATE hosts x  -- by the row's place: locked above, it has not moved (no walk of its older versions)
           SET ready_n = x.ready_n - 1, in_flight = x.in_flight + 1, last_out = now_,
               top_priority = coalesce(next_priority, 0), top_rank = coalesce(next_rank, 0)
         WHERE x.ctid = h.tid;
        bp := r.priority;
        br := r.rank;
        id := r.id; lease_no := l; host := h.name; priority := r.priority; attempts := r.attempts;
        dont_filter := r.dont_filter; fingerprint := r.fingerprint; not_before := r.not_before; record := r.record;
        bound_priority := bp; bound_rank := br; recheck_at := recheck;
        RETURN NEXT;
        n := n + 1;
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
