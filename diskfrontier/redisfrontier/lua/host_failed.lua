-- HOST_FAILED: one more consecutive failure of a host, and the block it causes (host_failed).
-- uses: common
--
-- ARGV: host, block_after, backoff, backoff_max. One more consecutive failure of the host (field
-- 'f'); from block_after on it is blocked (field 'b', never shortened) for backoff seconds doubled
-- for each failure past block_after, at most backoff_max. Returns {failures, blocked until or ''}.

local cs = crawl_settings()
local host = ARGV[1]
local after, backoff, most = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local hk = P .. 'h:' .. host
local failures = call('HINCRBY', hk, 'f', 1)
call('SADD', HOSTS, host)
if failures < after then
  return {failures, ''}
end
-- How long: the rule of diskfrontier/contract/backoff.py (host_backoff), which the job directory applies;
-- a change to one is made to the other.
local steps = failures - after
if steps > 64 then steps = 64 end
local seconds = backoff * 2 ^ steps
if seconds > most then seconds = most end
local blocked = num(call('HGET', hk, 'b'), hk, 'field b', true) or 0
local til = cs.now + seconds
if til > blocked then
  call('HSET', hk, 'b', string.format('%.17g', til))
  blocked = til
end
place(host, cs.now, cs)
return {failures, string.format('%.17g', blocked)}
