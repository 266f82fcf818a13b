-- leases: the end of a lease, shared by FINISH and by the acknowledgements a POP applies first.
-- uses: common

local function lease_missing(id)
  damaged(LEASE .. ' has no lease for request ' .. id .. ' (' .. OWNER .. ' has its token)')
end

-- True if ``token`` still holds the lease of request ``id`` (false: it ran out and was taken back, or
-- was released, and another client may hold it now); its token without its lease is damage (``ending``:
-- end_lease follows, which finds that as it removes the lease).
local function holds_lease(id, token, ending)
  if call('HGET', OWNER, id) ~= token then return false end
  if not ending and not call('ZSCORE', LEASE, id) then lease_missing(id) end
  return true
end

-- End the lease of request ``id`` (its host marked in ``touched``): its stored body, priority, host and
-- host key.
local function end_lease(id, touched)
  local old = call('HGET', REQ, id)
  local priority, host = head(old, id)
  local hk = P .. 'h:' .. host
  if call('ZREM', LEASE, id) == 0 then lease_missing(id) end
  call('HDEL', OWNER, id)
  call('HINCRBY', hk, 'i', -1)
  touched[host] = true
  return old, priority, host, hk
end

-- Request ``id`` (its lease ended) is finished: its body goes, its host counts it done, and the host's
-- failure streak ends.
local function forget_finished(id, hk)
  call('HDEL', REQ, id)
  call('HINCRBY', hk, 'd', 1)
  call('HDEL', hk, 'f')
end

-- Request ``id`` done (its lease ended and it is finished, as end_lease then forget_finished do), with its
-- host's counts read once and written in one HSET: for the dones a POP applies first.
local function end_done(id, touched)
  local priority, host = head(call('HGET', REQ, id), id)
  local hk = P .. 'h:' .. host
  if call('ZREM', LEASE, id) == 0 then lease_missing(id) end
  call('HDEL', OWNER, id)
  call('HDEL', REQ, id)
  local h = call('HMGET', hk, 'i', 'd', 'f')
  call('HSET', hk, 'i', (num(h[1], hk, 'field i', true) or 0) - 1, 'd', (num(h[2], hk, 'field d', true) or 0) + 1)
  if h[3] then call('HDEL', hk, 'f') end
  touched[host] = true
  return priority, host
end
