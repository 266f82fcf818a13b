-- SET_DONE: set a host's done count (set_done_count).
-- uses: common
--
-- ARGV: host, done count. Sets a host's done count (a crawl copied in keeps its hosts' counts).

local cs = crawl_settings()
local hk = P .. 'h:' .. ARGV[1]
local before = num(call('HGET', hk, 'd'), hk, 'field d', true) or 0
call('HSET', hk, 'd', ARGV[2])
call('SADD', HOSTS, ARGV[1])
call('HINCRBY', META, 'done', tonumber(ARGV[2]) - before)
place(ARGV[1], cs.now, cs)  -- a budget counts done requests
return 1
