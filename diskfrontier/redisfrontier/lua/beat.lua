-- BEAT: record a client as there and renew its leases (the open, the renewal thread).
-- uses: common, clients
--
-- ARGV: client id, its info (JSON: host, pid, lease), 'open' or 'beat' (both forget long-dead clients),
-- lease seconds, count, then per request: id, lease token. Records the client as seen now and renews
-- each lease for the seconds given (FINISH's 'extend'), in one step. Returns {now, then per request 1
-- (renewed) or 0 (the lease was lost)}.

local cs = crawl_settings()
local now = cs.now
local client, info, mode, seconds, n = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4]), tonumber(ARGV[5])
if mode ~= 'open' and mode ~= 'beat' then error({err = 'ERR BEAT takes open or beat, not ' .. tostring(mode)}) end
forget_dead(now)
beat(client, info, now)
local out = {tostring(now)}
for k = 0, n - 1 do
  local id, token = ARGV[6 + k * 2], ARGV[7 + k * 2]
  if call('HGET', OWNER, id) ~= token then
    out[k + 2] = 0
  elseif not call('ZSCORE', LEASE, id) then
    damaged(LEASE .. ' has no lease for request ' .. id .. ' (' .. OWNER .. ' has its token)')
  else
    call('ZADD', LEASE, now + seconds, id)
    out[k + 2] = 1
  end
end
return out
