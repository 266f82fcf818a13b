-- LOOK: bring a shard up to date and read its state (finished, next_ready, a pop across shards).
-- uses: common
--
-- ARGV: none. Reclaims run-out leases and releases what is due; returns
-- {pending, in flight, ready now (0/1), next event, now, paused (0/1)}.

local cs = crawl_settings()
local now = cs.now
local touched = {}
reclaim(now, 1000, touched)
release(now, 1000, touched)
place_all(touched, now, cs)
local c = call('HMGET', META, 'pending', 'inflight')
local ready = call('ZCARD', READY)
if ready == 0 then audit(tonumber(c[1])) end
return {tonumber(c[1]), tonumber(c[2]), ready, next_event(), tostring(now), cs.paused and 1 or 0}
