-- RECORD_FAILED: store requests as failed (record_failed, for a crawl copied in).
-- uses: common, seen
--
-- ARGV: count, then per request: seen key and field ('' and '': dont_filter), body (attempts set), and
-- its failinfo (the time, f64, and the error text). Stores each as a failed request under a new id, marks
-- its fingerprint seen and counts it in its host's done count, as FINISH's 'fail' does. Returns the count.

local cs = crawl_settings()
seen_open()
local n = tonumber(ARGV[1])
local seq = num(call('HGET', META, 'seq'), META, 'field seq')
local touched = {}
for k = 0, n - 1 do
  local key, field, body, info = ARGV[2 + k * 4], ARGV[3 + k * 4], ARGV[4 + k * 4], ARGV[5 + k * 4]
  if key ~= '' then seen_add(key, field) end
  seq = seq + 1
  local id = id_of(seq, cs.lifo)
  local _, host = head(body)
  call('HSET', P .. 'failed', id, body)
  call('HSET', P .. 'failinfo', id, info)
  call('HINCRBY', P .. 'h:' .. host, 'd', 1)
  call('SADD', HOSTS, host)
  touched[host] = true
end
if n > 0 then
  call('HSET', META, 'seq', seq)
  call('HINCRBY', META, 'failed', n)
end
seen_close()
place_all(touched, clock(), cs)  -- a budget counts done requests
return n
