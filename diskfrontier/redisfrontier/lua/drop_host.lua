-- DROP_HOST: one step of dropping a host's pending requests (drop(host=...)).
-- uses: common, drop
--
-- ARGV: host, phase, cursor, batch, dry ('1': count, change nothing), show. Phase 'd': one ZSCAN
-- step of delayed from cursor (about batch entries), dropping those of the host; phase 'q': drops up
-- to batch requests from the head of the host's queue (a dry run counts it whole). Returns {count,
-- the next cursor ('0': the phase is over), then the id and body of each of the first show of them}.

local cs = crawl_settings()
local host, phase, cursor, batch = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4])
local dry, show = ARGV[5] == '1', tonumber(ARGV[6])
local q = P .. 'q:' .. host
local out = {0, '0'}
local count = 0
if phase == 'd' then
  local scanned = call('ZSCAN', DELAYED, cursor, 'COUNT', batch)
  out[2] = scanned[1]
  local entries = scanned[2]
  for k = 1, #entries, 2 do
    local id = entries[k]
    local body = call('HGET', REQ, id)
    if not body then damaged(REQ .. ' has no request ' .. id .. ' (named by ' .. DELAYED .. ')') end
    local _, of = head(body, id)
    if of == host then
      count = count + 1
      if count <= show then
        out[#out + 1] = id
        out[#out + 1] = body
      end
      if not dry then
        call('ZREM', DELAYED, id)
        call('HDEL', REQ, id)
      end
    end
  end
  if not dry then dropped(count, {[host] = count}, count, {}, cs) end
elseif dry then
  count = call('ZCARD', q)
  if show > 0 then
    for _, id in ipairs(call('ZRANGE', q, 0, show - 1)) do
      out[#out + 1] = id
      out[#out + 1] = call('HGET', REQ, id)
    end
  end
else
  local ids = call('ZRANGE', q, 0, batch - 1)
  for _, id in ipairs(ids) do
    if (#out - 2) / 2 < show then
      out[#out + 1] = id
      out[#out + 1] = call('HGET', REQ, id)
    end
    call('ZREM', q, id)
    if call('HDEL', REQ, id) == 0 then damaged(REQ .. ' has no request ' .. id .. ' (named by ' .. q .. ')') end
  end
  count = #ids
  dropped(count, {[host] = count}, 0, {[host] = true}, cs)
  if count == batch then out[2] = 'more' end
end
out[1] = count
return out
