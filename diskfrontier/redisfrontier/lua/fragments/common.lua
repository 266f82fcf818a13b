-- common: what every step shares: key names, the clock, the checks of the crawl, host placement.
--

local META = KEYS[1]
local P = string.sub(META, 1, -5)
local READY, WAIT, DELAYED, LEASE = P .. 'ready', P .. 'wait', P .. 'delayed', P .. 'lease'
local REQ, OWNER, HOSTS, SENTINEL = P .. 'req', P .. 'owner', P .. 'hosts', P .. 'sentinel'
local FOREVER = 1e18
local delayed_now = 0  -- requests in DELAYED, kept up to date by every script as it runs

-- A key found wrong: the client raises CrawlDamaged with this text.
local function damaged(text)
  error({err = 'DFDAMAGED ' .. text})
end

-- redis.call, but a key of the wrong type or a field that is not a number is named as damage.
local function call(...)
  local r = redis.pcall(...)
  if type(r) == 'table' and r.err then
    local e = r.err
    if string.find(e, 'WRONGTYPE', 1, true) or string.find(e, 'not an integer', 1, true)
       or string.find(e, 'not a valid float', 1, true) then
      local args = {...}
      damaged(tostring(args[2]) .. ' cannot be read by ' .. args[1] .. ' (' .. e .. ')')
    end
    error(r)
  end
  return r
end

-- A number read from ``key`` (``what``: 'field F', 'score'); damage if it is not one (nil stays nil when
-- optional). The place is named only when it is damage: a step reads many numbers.
local function num(value, key, what, optional)
  if value == false or value == nil then
    if optional then return nil end
    damaged(key .. ' ' .. what .. ' is missing')
  end
  local n = tonumber(value)
  if n == nil or n ~= n then damaged(key .. ' ' .. what .. ' is ' .. string.format('%q', value) .. ', not a number') end
  return n
end

local function clock()
  local t = redis.call('TIME')
  return tonumber(t[1]) + tonumber(t[2]) / 1000000
end

-- Redis must never evict: a server switched to another maxmemory-policy after open is refused by
-- every step from at most POLICY_EVERY seconds after (INFO costs more than the rest of a step's
-- checks together, so it is read at most that often for the crawl, by whichever step comes).
local POLICY_EVERY = 0.1  -- seconds (docs/format.md, "Redis")
-- Returns true when the time of this check is to be written (after the other checks: a write may
-- be refused when memory is full).
local function check_policy(checked_at, now)
  local last = tonumber(checked_at)
  if last and now >= last and now - last < POLICY_EVERY then return false end
  local policy = string.match(redis.call('INFO', 'memory'), 'maxmemory_policy:(%S+)')
  if policy and policy ~= 'noeviction' then error({err = 'DFEVICTION ' .. policy}) end
  return checked_at ~= false
end

-- The crawl's settings, after the checks every step makes: the crawl exists, its sentinel is
-- there (the first key an evicting server drops), its counters are numbers and agree with the
-- sizes of the keys they count. ``extra``: more meta fields the step reads, in the same HMGET
-- (their values in ``extra`` of the answer, in that order).
local SETTINGS = 11  -- the fields crawl_settings reads for itself
local function crawl_settings(extra)
  local s = call('HMGET', META, 'order', 'delay', 'per_host', 'prefer', 'pending', 'inflight', 'delayed', 'seq',
                 'policy_at', 'paused', 'pushed', unpack(extra or {}))
  local now = clock()
  -- (a crawl whose meta is gone: the policy is checked first, and its time written nowhere)
  local checked = check_policy(s[9] or (s[1] and '0'), now)
  if not s[1] then
    if call('EXISTS', META) == 1 then damaged(META .. ' field order is missing') end
    if string.find(P, '/', 1, true) then  -- shard i > 0 (no crawl name holds '/'): the crawl is there without it
      damaged(META .. ' is gone: this shard of the crawl was deleted or evicted, with the requests of its hosts')
    end
    error({err = 'DFNOCRAWL'})
  end
  if call('EXISTS', SENTINEL) == 0 then
    damaged(SENTINEL .. ' is gone: Redis evicted keys of the crawl or something deleted them')
  end
  local pending = num(s[5], META, 'field pending')
  local inflight = num(s[6], META, 'field inflight')
  delayed_now = num(s[7], META, 'field delayed')
  local seq = num(s[8], META, 'field seq')
  local leased = call('ZCARD', LEASE)
  if leased ~= inflight then
    damaged(LEASE .. ' holds ' .. leased .. ' leases but ' .. META .. ' counts ' .. inflight .. ' in flight')
  end
  local owners = call('HLEN', OWNER)
  if owners ~= inflight then
    damaged(OWNER .. ' holds ' .. owners .. ' lease tokens but ' .. META .. ' counts ' .. inflight .. ' in flight')
  end
  local stored = call('HLEN', REQ)
  if stored ~= pending + inflight then
    damaged(REQ .. ' holds ' .. stored .. ' requests but ' .. META .. ' counts ' .. pending .. ' pending and '
            .. inflight .. ' in flight')
  end
  local waiting = call('ZCARD', DELAYED)
  if waiting ~= delayed_now then
    damaged(DELAYED .. ' holds ' .. waiting .. ' requests but ' .. META .. ' counts ' .. delayed_now .. ' delayed')
  end
  if checked then call('HSET', META, 'policy_at', tostring(now)) end
  local per_host = num(s[3], META, 'field per_host', true) or 0
  if per_host <= 0 then per_host = nil end
  local more = {}
  for k = 1, #(extra or {}) do more[k] = s[SETTINGS + k] end
  return {lifo = s[1] == 'lifo', delay = num(s[2], META, 'field delay', true) or 0, per_host = per_host,
          idle = s[4] == 'idle', pending = pending, inflight = inflight, now = now, paused = s[10] ~= false,
          seq = seq, pushed = num(s[11], META, 'field pushed', true) or 0, extra = more}
end

local function id_of(seq, lifo)
  if lifo then return string.format('%012x', 281474976710656 - seq) end
  return string.format('%012x', seq)
end

-- Priority, slot, attempts and not_before of the body stored as request ``id`` of hash ``where``.
local function head(body, id, where)
  where = where or REQ
  if not body then damaged(where .. ' has no request ' .. id .. ' (an index names it)') end
  local ok, priority, _, attempts, not_before, slotlen, at = pcall(struct.unpack, '>iBHdB', body)
  if not ok or #body < at + slotlen - 1 then
    damaged(where .. ' field ' .. id .. ' does not hold a request diskfrontier stored')
  end
  return priority, string.sub(body, at, at + slotlen - 1), attempts, not_before
end

-- Where a host belongs as its state calls for: ready under (member, score), waiting until wake, or
-- neither (nil, nil, nil: nothing pending, or a count holds it back).
local function target(host, h, hk, q, now, cs)
  local top = call('ZRANGE', q, 0, 0, 'WITHSCORES')
  if #top == 0 then return nil end
  local inflight = num(h[2], hk, 'field i', true) or 0
  if cs.per_host and inflight >= cs.per_host then return nil end
  local budget = num(h[6], hk, 'field bu', true)
  if budget and (num(h[3], hk, 'field d', true) or 0) + inflight >= budget then return nil end
  local delay = num(h[4], hk, 'field dl', true) or cs.delay
  local wake = 0
  if h[7] and delay > 0 then wake = num(h[7], hk, 'field t') + delay end
  local blocked = num(h[5], hk, 'field b', true) or 0
  if blocked > wake then wake = blocked end
  if wake > now then return nil, nil, wake end
  local score = num(top[2], q, 'score')
  if cs.idle then score = inflight * 8589934592 + score + 2147483648 end
  return top[1] .. host, score, nil
end

-- Put a host in the ready set or the waiting set as its state calls for (or in neither,
-- when it has nothing pending or a count holds it back). A host already where it belongs is
-- left there (a done, or a push behind its head, changes nothing of its place). ``popped``: one of
-- its requests was just handed out (taken from its queue, and its ready entry, this member, taken from the
-- ready set): one more leased, one fewer pending, its last hand-out now, written with its ready entry in
-- one HSET.
local function place(host, now, cs, popped)
  local hk = P .. 'h:' .. host
  local q = P .. 'q:' .. host
  local h = call('HMGET', hk, 'r', 'i', 'd', 'dl', 'b', 'bu', 't', 'p')
  local fields = {}
  if popped then
    h[2] = (num(h[2], hk, 'field i', true) or 0) + 1
    h[8] = (num(h[8], hk, 'field p', true) or 0) - 1
    h[7] = tostring(now)
    fields = {'i', h[2], 'p', h[8], 't', h[7]}
  end
  if delayed_now == 0 then  -- nothing waits for a time: a host's pending count is its queue's length
    local queued, pending = call('ZCARD', q), num(h[8], hk, 'field p', true) or 0
    if queued ~= pending then
      damaged(q .. ' holds ' .. queued .. ' requests but ' .. hk .. ' counts ' .. pending .. ' pending')
    end
  end
  local member, score, wake = target(host, h, hk, q, now, cs)
  local stays = false  -- already where it belongs
  if popped then  -- it was ready, under the entry the pop took (and so not waiting)
    if h[1] ~= popped then
      damaged(READY .. ' named ' .. popped .. ' for ' .. host .. ', but ' .. hk .. ' field r names '
              .. tostring(h[1]))
    end
    if not member then call('HDEL', hk, 'r') end  -- (else written below)
  elseif h[1] then  -- ready (and so not waiting)
    if h[1] == member then
      local was = call('ZSCORE', READY, member)
      if not was then damaged(READY .. ' lost ' .. host .. ' (its entry ' .. h[1] .. ' is gone)') end
      stays = tonumber(was) == score
    end
    if not stays then
      if call('ZREM', READY, h[1]) == 0 then
        damaged(READY .. ' lost ' .. host .. ' (its entry ' .. h[1] .. ' is gone)')
      end
      if not member then call('HDEL', hk, 'r') end  -- (else written below)
    end
  else
    if wake then
      local was = call('ZSCORE', WAIT, host)
      stays = was and tonumber(was) == wake
    end
    if not stays then call('ZREM', WAIT, host) end  -- only a host not ready may be waiting
  end
  if not stays then
    if member then
      call('ZADD', READY, score, member)
      fields[#fields + 1] = 'r'
      fields[#fields + 1] = member
    elseif wake then
      call('ZADD', WAIT, wake, host)
    end
  end
  if #fields > 0 then call('HSET', hk, unpack(fields)) end
end

local function place_all(touched, now, cs)
  for host in pairs(touched) do place(host, now, cs) end
end

-- A pending request goes into its host's queue (or waits for its time).
local function enqueue(id, host, priority, not_before, now, touched)
  if not_before > now then
    call('ZADD', DELAYED, not_before, id)
    call('HINCRBY', META, 'delayed', 1)
    delayed_now = delayed_now + 1
  else
    call('ZADD', P .. 'q:' .. host, -priority, id)
    touched[host] = true
  end
end

-- Leased requests taken back: pending again, at their place, counted in reclaimed (their leases ran
-- out, or an operator released them). Returns how many.
local function take_back(ids, touched)
  for _, id in ipairs(ids) do
    local priority, host = head(call('HGET', REQ, id), id)
    call('ZREM', LEASE, id)
    if call('HDEL', OWNER, id) == 0 then damaged(OWNER .. ' has no token for leased request ' .. id) end
    call('ZADD', P .. 'q:' .. host, -priority, id)
    local hk = P .. 'h:' .. host
    call('HINCRBY', hk, 'i', -1)
    call('HINCRBY', hk, 'p', 1)
    touched[host] = true
  end
  if #ids > 0 then
    call('HINCRBY', META, 'inflight', -#ids)
    call('HINCRBY', META, 'pending', #ids)
    call('HINCRBY', META, 'reclaimed', #ids)
  end
  return #ids
end

-- Leases that ran out (at most ``limit``): the requests are pending again, at their place.
local function reclaim(now, limit, touched)
  return take_back(call('ZRANGEBYSCORE', LEASE, '-inf', now, 'LIMIT', 0, limit), touched)
end

-- Requests whose not_before has come join their host's queue; hosts whose time has come wake.
local function release(now, limit, touched)
  local ids = {}  -- (nothing delayed, as the checked count says: nothing to read)
  if delayed_now > 0 then ids = call('ZRANGEBYSCORE', DELAYED, '-inf', now, 'LIMIT', 0, limit) end
  for _, id in ipairs(ids) do
    local priority, host = head(call('HGET', REQ, id), id)
    call('ZREM', DELAYED, id)
    call('ZADD', P .. 'q:' .. host, -priority, id)
    touched[host] = true
  end
  if #ids > 0 then
    call('HINCRBY', META, 'delayed', -#ids)
    delayed_now = delayed_now - #ids
  end
  local hosts = call('ZRANGEBYSCORE', WAIT, '-inf', now, 'LIMIT', 0, limit)
  for _, host in ipairs(hosts) do touched[host] = true end
end

-- True if only a call can let a host hand out again: blocked for ever, or at its budget with
-- nothing leased.
local function held_for_ever(host)
  local hk = P .. 'h:' .. host
  local h = call('HMGET', hk, 'b', 'bu', 'd', 'i')
  if (num(h[1], hk, 'field b', true) or 0) >= FOREVER then return true end
  local budget = num(h[2], hk, 'field bu', true)
  return budget ~= nil and (num(h[4], hk, 'field i', true) or 0) == 0
         and (num(h[3], hk, 'field d', true) or 0) >= budget
end

-- The due time of the first request waiting for a time whose host waiting alone can free
-- (nil if none); past 64 of held hosts, the next one's time.
local function next_due()
  local first = call('ZRANGE', DELAYED, 0, 64, 'WITHSCORES')
  for k = 1, #first, 2 do
    if k > 128 then return tonumber(first[k + 1]) end
    local _, host = head(call('HGET', REQ, first[k]), first[k])
    if not held_for_ever(host) then return tonumber(first[k + 1]) end
  end
  return nil
end

-- The earliest time anything held back by time may become ready (an empty string if none).
local function next_event()
  local best = next_due()
  for _, key in ipairs({WAIT, LEASE}) do
    local first = call('ZRANGE', key, 0, 0, 'WITHSCORES')
    if #first > 0 then
      local t = tonumber(first[2])
      if t < FOREVER and (best == nil or t < best) then best = t end
    end
  end
  if best == nil then return '' end
  return tostring(best)
end

-- Requests are queued (pending and not delayed), yet no host is ready and nothing waits for a
-- time or a lease: unless every host holding them is held for ever (its budget), an index was
-- deleted or changed from outside. Looked into once per state of the crawl (its counters).
local function audit(pending)
  local queued = pending - delayed_now
  if queued <= 0 or call('ZCARD', READY) > 0 or call('ZCARD', WAIT) > 0 or call('ZCARD', LEASE) > 0 then
    return
  end
  local c = call('HMGET', META, 'seq', 'leases', 'done', 'failed', 'audited')
  local stamp = table.concat({tostring(c[1]), tostring(c[2]), tostring(c[3]), tostring(c[4]), pending}, ':')
  if c[5] == stamp then return end
  local found = 0
  for _, host in ipairs(call('SMEMBERS', HOSTS)) do
    local q, hk = P .. 'q:' .. host, P .. 'h:' .. host
    local n = call('ZCARD', q)
    local counted = num(call('HGET', hk, 'p'), hk, 'field p', true) or 0
    if delayed_now == 0 and n ~= counted then
      damaged(q .. ' holds ' .. n .. ' requests but ' .. hk .. ' counts ' .. counted .. ' pending')
    end
    if n > 0 and not held_for_ever(host) then
      damaged(q .. ' holds ' .. n .. ' requests but its host is in neither ' .. READY .. ' nor ' .. WAIT)
    end
    found = found + n
  end
  if found ~= queued then
    damaged(META .. ' counts ' .. queued .. ' requests queued (pending, not delayed) but the queues of the hosts in '
            .. HOSTS .. ' hold ' .. found)
  end
  call('HSET', META, 'audited', stamp)
end
