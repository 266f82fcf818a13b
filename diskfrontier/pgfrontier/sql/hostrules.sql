-- Host settings: each made on a host's row (made if new), for every client at once.

-- SET_HOST: p_field is 'delay', 'blocked_until', 'budget' or 'done'; p_value NULL clears it ('done': 0).
CREATE OR REPLACE FUNCTION set_host(p_name text, p_field text, p_value double precision) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    h integer := host_id(p_name);
BEGIN
    IF p_field = 'delay' THEN
        UPDATE hosts SET delay = p_value WHERE id = h;
    ELSIF p_field = 'blocked_until' THEN
        UPDATE hosts SET blocked_until = p_value WHERE id = h;
    ELSIF p_field = 'budget' THEN
        UPDATE hosts SET budget = p_value::bigint WHERE id = h;
    ELSIF p_field = 'done' THEN
        UPDATE hosts SET done = coalesce(p_value, 0)::bigint WHERE id = h;
    ELSE
        RAISE EXCEPTION 'set_host(): unknown field %', p_field;
    END IF;
END $$;

-- HOST_FAILED: one more consecutive failure of a host; from p_block_after on, each blocks it (never
-- shortening a longer block) for p_backoff doubled for each failure past p_block_after, at most
-- p_backoff_max (contract/backoff.py's rule). The time it is blocked until, or NULL if not blocked by this.
CREATE OR REPLACE FUNCTION host_failed(p_name text, p_block_after integer, p_backoff double precision,
                                       p_backoff_max double precision) RETURNS double precision
LANGUAGE plpgsql AS $$
DECLARE
    h integer := host_id(p_name);
    streak integer;
    until double precision;
BEGIN
    UPDATE hosts SET failures = failures + 1 WHERE id = h RETURNING failures INTO streak;
    IF streak < p_block_after THEN
        RETURN NULL;
    END IF;
    until := now_s() + least(p_backoff * power(2::double precision, least(streak - p_block_after, 64)),
                             p_backoff_max);
    UPDATE hosts SET blocked_until = greatest(coalesce(blocked_until, 0), until) WHERE id = h
    RETURNING blocked_until INTO until;
    RETURN until;
END $$;
