-- REQUEUE_FAILED: failed requests pending again (requeue_failed).
-- uses: common
--
-- ARGV: at most how many (0: all). Failed requests are pending again (attempts 0), oldest
-- failure first. Returns how many.

local cs = crawl_settings()
local now = cs.now
local limit = tonumber(ARGV[1])
local info = call('HGETALL', P .. 'failinfo')
local order = {}
for k = 1, #info, 2 do
  local ok, at = pcall(struct.unpack, '>d', info[k + 1])
  if not ok then damaged(P .. 'failinfo field ' .. info[k] .. ' does not hold a failure diskfrontier stored') end
  order[#order + 1] = {id = info[k], at = at}
end
table.sort(order, function(a, b) return a.at < b.at end)
local seq = num(call('HGET', META, 'seq'), META, 'field seq')
local touched, count = {}, 0
for _, entry in ipairs(order) do
  if limit > 0 and count >= limit then break end
  local body = call('HGET', P .. 'failed', entry.id)
  call('HDEL', P .. 'failed', entry.id)
  call('HDEL', P .. 'failinfo', entry.id)
  if body then
    head(body, entry.id, P .. 'failed')
    seq = seq + 1
    local id = id_of(seq, cs.lifo)
    local stored = string.sub(body, 1, 5) .. struct.pack('>Hd', 0, 0) .. string.sub(body, 16)
    local priority, host = head(stored, id)
    if call('HSET', REQ, id, stored) == 0 then
      damaged(REQ .. ' already holds request ' .. id .. ': ' .. META .. ' field seq is behind')
    end
    enqueue(id, host, priority, 0, now, touched)
    call('HINCRBY', P .. 'h:' .. host, 'p', 1)
    count = count + 1
  end
end
if count > 0 then
  call('HSET', META, 'seq', seq)
  call('HINCRBY', META, 'pending', count)
  call('HINCRBY', META, 'failed', -count)
end
place_all(touched, now, cs)
return count
