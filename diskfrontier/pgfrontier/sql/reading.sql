-- STATS: the crawl's counters (every client's parts added up) and its state, as one JSON object.
CREATE OR REPLACE FUNCTION stats() RETURNS jsonb
LANGUAGE sql AS $$
    SELECT (SELECT jsonb_build_object(
                'pending', coalesce(sum(x.ready_n + x.waiting_n), 0),
                'in_flight', coalesce(sum(x.in_flight), 0),
                'delayed', coalesce(sum(x.waiting_n), 0),
                'hosts', count(*),
                'ready_hosts', count(*) FILTER (
                    WHERE x.ready_n > 0 AND x.last_out + coalesce(x.delay, setting_delay()) <= now_s()
                      AND (x.blocked_until IS NULL OR x.blocked_until <= now_s())
                      AND (setting_per_host() = 0 OR x.in_flight < setting_per_host())
                      AND (x.budget IS NULL OR x.done + x.in_flight < x.budget)))
              FROM hosts x)
        || (SELECT coalesce(jsonb_object_agg(c.name, c.total), '{}'::jsonb)
              FROM (SELECT name, sum(value) AS total FROM counters GROUP BY name) c)
        || jsonb_build_object('paused_since', (SELECT m.value FROM meta m WHERE m.name = 'paused_since'),
                              'delay', setting_delay(), 'per_host', setting_per_host())
$$;
