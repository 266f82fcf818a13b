-- SET_HOST: one setting of a host (set_delay, block, unblock, set_budget).
-- uses: common
--
-- ARGV: host, field ('dl' delay, 'b' blocked until, 'bu' budget), value ('' removes it).

local cs = crawl_settings()
local host, field, value = ARGV[1], ARGV[2], ARGV[3]
local hk = P .. 'h:' .. host
if value == '' then call('HDEL', hk, field) else call('HSET', hk, field, value) end
call('SADD', HOSTS, host)
place(host, cs.now, cs)
return 1
