-- POP: lease the best ready requests to a client (pop, pop_many), after the client's dones not sent yet.
-- uses: common, leases
--
-- ARGV: how many (at most), lease seconds, the client's id, then optionally how many dones come first
-- and per done: id, lease token (``ack="deferred"``: the client's dones since its last step, applied
-- first, as FINISH applies a done). Returns {count, state, then per request: id, body, lease token,
-- lease expiry, then per done: 1, or 0 if its lease was lost (nothing changed)}; state (when fewer
-- than asked were ready) is "next-event now pending in-flight paused" (next-event empty if nothing
-- waits for a time; paused 1 if the crawl is paused, 0 if not). A paused crawl hands out nothing
-- (leases that ran out are still taken back, and what is due still released).

local cs = crawl_settings({'done', 'leases'})
local now = cs.now
local want, lease, client = tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3]
local touched = {}
local acks, acked = {}, 0
-- A done moves its host only where its count of leases places it (per_host, prefer idle): its done count
-- rises as its leases fall, so a budget holds it as before, and its delay counts from its last hand-out.
local moved = (cs.per_host or cs.idle) and touched or {}
for k = 0, (tonumber(ARGV[4]) or 0) - 1 do
  local id = ARGV[5 + 2 * k]
  if holds_lease(id, ARGV[6 + 2 * k], true) then
    end_done(id, moved)
    acked = acked + 1
    acks[k + 1] = 1
  else
    acks[k + 1] = 0
  end
end
local inflight = cs.inflight - acked
if acked > 0 then  -- counted at once: a script stopped by damage further on keeps what it wrote
  call('HSET', META, 'inflight', inflight, 'done', (num(cs.extra[1], META, 'field done', true) or 0) + acked)
end
-- (nothing leased nor delayed, as the counters checked against the keys say: nothing to take back or release)
if inflight > 0 then
  local back = reclaim(now, 1000, touched)
  inflight = inflight - back
  cs.pending = cs.pending + back
end
release(now, 1000, touched)
place_all(touched, now, cs)
local out = {0, ''}
local got = 0
local leases = num(cs.extra[2], META, 'field leases', true) or 0
while not cs.paused and got < want do
  local best = call('ZPOPMIN', READY)
  if #best == 0 then break end
  local member = best[1]
  local id, host = string.sub(member, 1, 12), string.sub(member, 13)
  local body = call('HGET', REQ, id)
  if not body then damaged(REQ .. ' has no request ' .. id .. ' (named by ' .. READY .. ')') end
  head(body, id)
  if call('ZREM', P .. 'q:' .. host, id) == 0 then
    damaged(READY .. ' names request ' .. id .. ' of ' .. host .. ', which is not in ' .. P .. 'q:' .. host)
  end
  place(host, now, cs, member)
  local expiry = now + lease
  leases = leases + 1
  local token = client .. ':' .. leases
  call('ZADD', LEASE, expiry, id)
  call('HSET', OWNER, id, token)
  got = got + 1
  out[#out + 1] = id
  out[#out + 1] = body
  out[#out + 1] = token
  out[#out + 1] = tostring(expiry)
end
if got > 0 then
  call('HSET', META, 'pending', cs.pending - got, 'inflight', inflight + got, 'leases', leases)
end
out[1] = got
for k = 1, #acks do out[#out + 1] = acks[k] end
if got < want then
  local c = call('HMGET', META, 'pending', 'inflight')
  audit(tonumber(c[1]))
  out[2] = next_event() .. ' ' .. tostring(now) .. ' ' .. (c[1] or '0') .. ' ' .. (c[2] or '0') .. ' '
           .. (cs.paused and '1' or '0')
end
return out
