-- PUSH: dedupe, store and enqueue requests (push, push_many, push_each, push_record).
-- uses: common, seen
--
-- ARGV: count, then per request: seen key ('' for dont_filter), seen field, host, priority,
-- body, not_before. Returns 1 (queued) or 0 (a duplicate) per request.

local cs = crawl_settings(SEEN_FIELDS)
local now = cs.now
seen_open(cs.extra)
local n = tonumber(ARGV[1])
local out, touched, added, dups = {}, {}, 0, 0
local seq = cs.seq
for k = 0, n - 1 do
  local a = 2 + k * 6
  local seen_key, host = ARGV[a], ARGV[a + 2]
  local fresh = true
  if seen_key ~= '' then fresh = seen_add(seen_key, ARGV[a + 1]) == 1 end
  if fresh then
    seq = seq + 1
    local id = id_of(seq, cs.lifo)
    if call('HSET', REQ, id, ARGV[a + 4]) == 0 then
      damaged(REQ .. ' already holds request ' .. id .. ': ' .. META .. ' field seq is behind')
    end
    enqueue(id, host, tonumber(ARGV[a + 3]), tonumber(ARGV[a + 5]), now, touched)
    call('SADD', HOSTS, host)
    call('HINCRBY', P .. 'h:' .. host, 'p', 1)
    added = added + 1
    out[k + 1] = 1
  else
    dups = dups + 1
    out[k + 1] = 0
  end
end
local fields = {}
if added > 0 then fields = {'seq', seq, 'pending', cs.pending + added, 'pushed', cs.pushed + added} end
seen_close(fields)
if #fields > 0 then call('HSET', META, unpack(fields)) end
if dups > 0 then call('HINCRBY', META, 'duplicates', dups) end
place_all(touched, now, cs)
return out
