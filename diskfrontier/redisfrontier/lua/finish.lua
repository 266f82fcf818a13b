-- FINISH: end or renew leases (done, retry, refetch, fail, extend, the close's release).
-- uses: common, leases
--
-- ARGV: what ('done', 'retry', 'refetch', 'release', 'extend', 'fail'; 'refetch+FLAGS' for a page
-- revisited: r a revisit, c that found it changed, n answered 304, each counted in the meta), seconds, count, then per
-- request: id, lease token, new body (retry/refetch: the request as it is now, attempts set;
-- fail: the time, f64, and the error text, kept in the failinfo hash beside the request).
-- Returns per request 1 (done) or 0 (the lease was lost: another client may hold it).

local cs = crawl_settings()
local now = cs.now
local what, flags = string.match(ARGV[1], '^(%a+)%+?(%a*)$')
local seconds, n = tonumber(ARGV[2]), tonumber(ARGV[3])
local out, touched = {}, {}
local done, moved, back, requeued, failed = 0, 0, 0, 0, 0
local seq = nil
for k = 0, n - 1 do
  local id, token, body = ARGV[4 + k * 3], ARGV[5 + k * 3], ARGV[6 + k * 3]
  if not holds_lease(id, token, what ~= 'extend') then
    out[k + 1] = 0
  elseif what == 'extend' then
    call('ZADD', LEASE, now + seconds, id)
    out[k + 1] = 1
  else
    out[k + 1] = 1
    local old, priority, host, hk = end_lease(id, touched)
    if what == 'release' then
      call('ZADD', P .. 'q:' .. host, -priority, id)
      call('HINCRBY', hk, 'p', 1)
      back = back + 1
    elseif what == 'fail' then
      call('HDEL', REQ, id)
      call('HSET', P .. 'failed', id, old)
      call('HSET', P .. 'failinfo', id, body)
      call('HINCRBY', hk, 'd', 1)
      failed = failed + 1
    elseif what == 'retry' then
      call('HDEL', REQ, id)
    else
      forget_finished(id, hk)
      done = done + 1
    end
    if what == 'retry' or what == 'refetch' then
      if seq == nil then seq = num(call('HGET', META, 'seq'), META, 'field seq') end
      seq = seq + 1
      local new = id_of(seq, cs.lifo)
      local due = 0
      if seconds > 0 then due = now + seconds end
      local stored = string.sub(body, 1, 7) .. struct.pack('>d', due) .. string.sub(body, 16)
      local new_priority, new_host = head(stored, new)
      if call('HSET', REQ, new, stored) == 0 then
        damaged(REQ .. ' already holds request ' .. new .. ': ' .. META .. ' field seq is behind')
      end
      enqueue(new, new_host, new_priority, due, now, touched)
      call('HINCRBY', P .. 'h:' .. new_host, 'p', 1)
      if new_host ~= host then call('SADD', HOSTS, new_host) end
      requeued = requeued + 1
      if what == 'retry' then moved = moved + 1 end
    end
  end
end
if seq ~= nil then call('HSET', META, 'seq', seq) end
local left = done + moved + back + failed
if failed > 0 then call('HINCRBY', META, 'failed', failed) end
if left > 0 then
  call('HINCRBY', META, 'inflight', -left)
  if done > 0 then call('HINCRBY', META, 'done', done) end
  if back + requeued > 0 then call('HINCRBY', META, 'pending', back + requeued) end
  if moved > 0 then call('HINCRBY', META, 'retried', moved) end
  if requeued > moved then call('HINCRBY', META, 'refetch_scheduled', requeued - moved) end
  if flags ~= '' and requeued > moved then
    if string.find(flags, 'r', 1, true) then call('HINCRBY', META, 'revisits', 1) end
    if string.find(flags, 'c', 1, true) then call('HINCRBY', META, 'revisit_changes', 1) end
    if string.find(flags, 'n', 1, true) then call('HINCRBY', META, 'revisit_not_modified', 1) end
  end
end
place_all(touched, now, cs)
return out
