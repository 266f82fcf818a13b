"""The Lua scripts of the Redis backend: every step that touches more than one key is one script.

Keys of one crawl share the hash tag ``{crawl}``: ``KEYS[1]`` is ``df:{crawl}:meta`` and the
others are named from it (all in the same cluster slot). See ``docs/format.md``, "Redis".

A request's body in the ``req`` hash is ``>iBHd`` (priority, flags, attempts, not_before), a
slot (u8 length), a fingerprint (u8 length) and the msgpack request record. Its id is its
sequence number as 12 hex digits (2**48 - seq for LIFO), so that ids sort in queue order.
Times are the Redis server's clock (``TIME``), so every client agrees on delays and leases.
"""

from __future__ import annotations

# Shared by every script: key names, the clock, the crawl's settings and host placement.
_COMMON = r"""
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

-- A number read from a key; damage if it is not one (nil stays nil when optional).
local function num(value, where, optional)
  if value == false or value == nil then
    if optional then return nil end
    damaged(where .. ' is missing')
  end
  local n = tonumber(value)
  if n == nil or n ~= n then damaged(where .. ' is ' .. string.format('%q', value) .. ', not a number') end
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
-- sizes of the keys they count.
local function crawl_settings()
  local s = call('HMGET', META, 'order', 'delay', 'per_host', 'prefer', 'pending', 'inflight', 'delayed', 'seq',
                 'policy_at', 'paused', 'pushed')
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
  local pending = num(s[5], META .. ' field pending')
  local inflight = num(s[6], META .. ' field inflight')
  delayed_now = num(s[7], META .. ' field delayed')
  local seq = num(s[8], META .. ' field seq')
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
  local per_host = num(s[3], META .. ' field per_host', true) or 0
  if per_host <= 0 then per_host = nil end
  return {lifo = s[1] == 'lifo', delay = num(s[2], META .. ' field delay', true) or 0, per_host = per_host,
          idle = s[4] == 'idle', pending = pending, now = now, paused = s[10] ~= false, seq = seq,
          pushed = num(s[11], META .. ' field pushed', true) or 0}
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
  local inflight = num(h[2], hk .. ' field i', true) or 0
  if cs.per_host and inflight >= cs.per_host then return nil end
  local budget = num(h[6], hk .. ' field bu', true)
  if budget and (num(h[3], hk .. ' field d', true) or 0) + inflight >= budget then return nil end
  local delay = num(h[4], hk .. ' field dl', true) or cs.delay
  local wake = 0
  if h[7] and delay > 0 then wake = num(h[7], hk .. ' field t') + delay end
  local blocked = num(h[5], hk .. ' field b', true) or 0
  if blocked > wake then wake = blocked end
  if wake > now then return nil, nil, wake end
  local score = num(top[2], q .. ' score')
  if cs.idle then score = inflight * 8589934592 + score + 2147483648 end
  return top[1] .. host, score, nil
end

-- Put a host in the ready set or the waiting set as its state calls for (or in neither,
-- when it has nothing pending or a count holds it back). A host already where it belongs is
-- left there (a done, or a push behind its head, changes nothing of its place).
local function place(host, now, cs)
  local hk = P .. 'h:' .. host
  local q = P .. 'q:' .. host
  local h = call('HMGET', hk, 'r', 'i', 'd', 'dl', 'b', 'bu', 't', 'p')
  if delayed_now == 0 then  -- nothing waits for a time: a host's pending count is its queue's length
    local queued, pending = call('ZCARD', q), num(h[8], hk .. ' field p', true) or 0
    if queued ~= pending then
      damaged(q .. ' holds ' .. queued .. ' requests but ' .. hk .. ' counts ' .. pending .. ' pending')
    end
  end
  local member, score, wake = target(host, h, hk, q, now, cs)
  if h[1] then  -- ready (and so not waiting)
    if h[1] == member then
      local was = call('ZSCORE', READY, member)
      if not was then damaged(READY .. ' lost ' .. host .. ' (its entry ' .. h[1] .. ' is gone)') end
      if tonumber(was) == score then return end
    end
    if call('ZREM', READY, h[1]) == 0 then
      damaged(READY .. ' lost ' .. host .. ' (its entry ' .. h[1] .. ' is gone)')
    end
    call('HDEL', hk, 'r')
  elseif wake then
    local was = call('ZSCORE', WAIT, host)
    if was and tonumber(was) == wake then return end
  end
  call('ZREM', WAIT, host)
  if member then
    call('ZADD', READY, score, member)
    call('HSET', hk, 'r', member)
  elseif wake then
    call('ZADD', WAIT, wake, host)
  end
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
  local ids = call('ZRANGEBYSCORE', DELAYED, '-inf', now, 'LIMIT', 0, limit)
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
  if (num(h[1], hk .. ' field b', true) or 0) >= FOREVER then return true end
  local budget = num(h[2], hk .. ' field bu', true)
  return budget ~= nil and (num(h[4], hk .. ' field i', true) or 0) == 0
         and (num(h[3], hk .. ' field d', true) or 0) >= budget
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
    local counted = num(call('HGET', hk, 'p'), hk .. ' field p', true) or 0
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
"""

# The crawl's seen set, in whichever layout the crawl has (meta field seen_layout; absent: 'hash').
# Each fingerprint comes as two ARGV values: 'hash' bucket key and field; 'set64' the 64-bit key
# (signed decimal) and its low 32 bits; 'bloom' two 48-bit hashes. See docs/format.md, "Seen set".
_SEEN = r"""
local SEEN = nil
local BLOOM_PART = 8388608  -- at most this many bits in one bitmap key of a Bloom filter (1 MiB)
local BLOOM_FIRST, BLOOM_GROWTH, BLOOM_TIGHTEN = 100000, 2, 0.8
-- Bit n of MAP is set while seen bucket n (set64) or Bloom filter part n (bloom: the parts of the
-- filters one after the other) holds something: a bucket whose bit is set and that is not there was
-- evicted or deleted. Meta field seen_map says the map covers every bucket (its key must be there
-- once anything was seen); a crawl made before the map gets it from the open's SEEN_CHECK walk.
local MAP = P .. 'seen_map'

-- A Bloom filter's settings as meta keeps them ('capacity bits hashes'); its bits are split in
-- ``parts`` bitmap keys of ``pb`` bits each, and all the bits of one fingerprint are in one part.
-- ``offset``: the MAP bit of its part 0.
local function bloom_filter(i, text, offset)
  local cap, m, k = string.match(text or '', '^(%d+) (%d+) (%d+)$')
  if not cap then damaged(META .. ' field bloom_' .. i .. ' is not a Bloom filter diskfrontier made') end
  m = tonumber(m)
  local parts = math.ceil(m / BLOOM_PART)
  return {cap = tonumber(cap), m = m, k = tonumber(k), parts = parts, pb = math.ceil(m / parts), made = {},
          offset = offset}
end

local function seen_open()
  local s = call('HMGET', META, 'seen_layout', 'seen_level', 'seen_split', 'seen_fill', 'seen',
                 'bloom_rate', 'bloom_filters', 'bloom_last', 'v', 'seen_map')
  if not s[1] and s[9] and string.sub(s[9], 1, 1) ~= '1' then
    damaged(META .. ' field seen_layout is missing (a crawl of format ' .. s[9] .. ' names the layout of its seen set)')
  end
  SEEN = {layout = s[1] or 'hash', count = num(s[5], META .. ' field seen'), fresh = 0, checked = {},
          mapped = s[10] ~= false}
  if SEEN.layout == 'set64' then
    SEEN.level = num(s[2], META .. ' field seen_level')
    SEEN.split = num(s[3], META .. ' field seen_split')
    SEEN.fill = num(s[4], META .. ' field seen_fill')
  elseif SEEN.layout == 'bloom' then
    SEEN.rate = num(s[6], META .. ' field bloom_rate')
    SEEN.n = num(s[7], META .. ' field bloom_filters')
    SEEN.last = num(s[8], META .. ' field bloom_last')
    SEEN.f = {}
    if SEEN.n > 0 then
      local names = {}
      for i = 1, SEEN.n do names[i] = 'bloom_' .. i end
      local got = call('HMGET', META, unpack(names))
      local offset = 0
      for i = 1, SEEN.n do
        SEEN.f[i] = bloom_filter(i, got[i], offset)
        offset = offset + SEEN.f[i].parts
      end
    end
  elseif SEEN.layout ~= 'hash' then
    damaged(META .. ' field seen_layout is ' .. SEEN.layout .. ', a layout this version of diskfrontier does not know')
  end
end

-- Check the seen bucket (or Bloom filter part) ``key`` whose MAP bit is ``bit``, before the step reads or
-- writes it: one that is not there must not have its bit set (nor, once anything was seen, may the map
-- of a mapped crawl be gone). ``making``: this step's write makes it: its bit is set. Once a step.
local function seen_bucket(key, bit, making)
  local state = SEEN.checked[key]
  if state == nil then
    state = 'there'
    if call('EXISTS', key) == 0 then
      if call('GETBIT', MAP, bit) == 1 then
        damaged(key .. ' is gone: Redis evicted it or something deleted it, with the seen fingerprints it held: '
                .. 'the URLs they stand for would be accepted again')
      end
      if SEEN.mapped and SEEN.count > 0 and call('EXISTS', MAP) == 0 then
        damaged(MAP .. ' is gone: Redis evicted it or something deleted it (it tells which seen buckets must be '
                .. 'there)')
      end
      state = 'new'
    end
    SEEN.checked[key] = state
  end
  if making and state == 'new' then
    call('SETBIT', MAP, bit, 1)
    SEEN.checked[key] = 'there'
  end
end

-- set64: the bucket of a key whose low 32 bits are ``low`` (linear hashing), and its number.
local function set_bucket(low)
  local b = low % (2 ^ SEEN.level)
  if b < SEEN.split then b = low % (2 ^ (SEEN.level + 1)) end
  return P .. 'k:' .. string.format('%x', b), b
end


-- The low 32 bits of a key kept as a signed decimal integer (exact in doubles: at most 2**36).
local function low32(member)
  local neg = string.byte(member, 1) == 45
  local r = 0
  for i = neg and 2 or 1, #member do r = (r * 10 + string.byte(member, i) - 48) % 4294967296 end
  if neg and r > 0 then r = 4294967296 - r end
  return r
end

local function add_all(key, members)
  for at = 1, #members, 1000 do
    call('SADD', key, unpack(members, at, math.min(at + 999, #members)))
  end
end

-- set64: split bucket ``split`` into itself and ``split + 2**level`` (the members whose bit
-- ``level`` is set move). Both are written anew, so each is an intset again however it was kept.
local function split_one()
  local bit = 2 ^ SEEN.level
  local from = P .. 'k:' .. string.format('%x', SEEN.split)
  local to = P .. 'k:' .. string.format('%x', SEEN.split + bit)
  local stay, move = {}, {}
  local members = call('SMEMBERS', from)
  if #members == 0 then seen_bucket(from, SEEN.split, false) end
  for _, member in ipairs(members) do
    if math.floor(low32(member) / bit) % 2 == 1 then move[#move + 1] = member else stay[#stay + 1] = member end
  end
  if #move > 0 then
    call('DEL', from)
    add_all(from, stay)
    add_all(to, move)
    call('SETBIT', MAP, SEEN.split + bit, 1)
    if #stay == 0 then call('SETBIT', MAP, SEEN.split, 0) end
  end
  SEEN.split = SEEN.split + 1
  if SEEN.split == bit then
    SEEN.level = SEEN.level + 1
    SEEN.split = 0
  end
end

-- bloom: a new filter, the last of the series (capacity and error rate from its place in it).
local function bloom_grow()
  local i = SEEN.n + 1
  local cap = BLOOM_FIRST * BLOOM_GROWTH ^ (i - 1)
  local p = SEEN.rate * (1 - BLOOM_TIGHTEN) * BLOOM_TIGHTEN ^ (i - 1)
  local m = math.ceil(cap * -math.log(p) / (math.log(2) ^ 2))
  local k = math.max(1, math.floor(-math.log(p) / math.log(2) + 0.5))
  local text = string.format('%d %d %d', cap, m, k)
  SEEN.f[i] = bloom_filter(i, text, i == 1 and 0 or SEEN.f[i - 1].offset + SEEN.f[i - 1].parts)
  SEEN.n, SEEN.last = i, 0
  call('HSET', META, 'bloom_' .. i, text, 'bloom_filters', i, 'bloom_last', 0)
end

-- bloom: check part ``part`` of filter i (``seen_bucket``).
local function bloom_part(i, part, making)
  seen_bucket(P .. 'b:' .. i .. ':' .. part, SEEN.f[i].offset + part, making)
end

-- bloom: the part key of (h1, h2) in filter i, and its k bit offsets in it (enhanced double hashing
-- within the part); ``each(offset)`` is called for each until it returns false.
local function bloom_walk(i, h1, h2, each)
  local f = SEEN.f[i]
  local pb = f.pb
  local key = P .. 'b:' .. i .. ':' .. (h1 % f.parts)
  local x, y = h2 % pb, math.floor(h1 / f.parts) % pb
  for j = 0, f.k - 1 do
    if each(key, x) == false then return false end
    x = (x + y) % pb
    y = (y + j + 1) % pb
  end
  return key
end

-- bloom: true if every bit of (h1, h2) is set in filter i (GETBIT until the first 0: a fingerprint
-- not in the filter costs about two reads).
local function bloom_in(i, h1, h2)
  return bloom_walk(i, h1, h2, function(key, x)
    if call('GETBIT', key, x) == 1 then return true end
    bloom_part(i, h1 % SEEN.f[i].parts, false)  -- a part that is gone reads as zeros
    return false
  end) ~= false
end

-- bloom: set the bits of (h1, h2) in filter i, in one BITFIELD. A part is made whole at its first
-- write (a string of its size), as SETBIT and BITFIELD would grow it by doubling.
local function bloom_set(i, h1, h2)
  local f = SEEN.f[i]
  local args = {''}
  local key = bloom_walk(i, h1, h2, function(_, x)
    args[#args + 1] = 'SET'
    args[#args + 1] = 'u1'
    args[#args + 1] = x
    args[#args + 1] = 1
  end)
  args[1] = key
  if not f.made[key] then
    bloom_part(i, h1 % f.parts, true)
    if call('EXISTS', key) == 0 then call('SET', key, string.rep('\0', math.ceil(f.pb / 8))) end
    f.made[key] = true
  end
  call('BITFIELD', unpack(args))
end

local function bloom_has(h1, h2)
  for i = SEEN.n, 1, -1 do
    if bloom_in(i, h1, h2) then return true end
  end
  return false
end

-- 1 if the fingerprint (its two ARGV values) was not in the seen set and is now, 0 if it was.
local function seen_add(a, b)
  local added
  if SEEN.layout == 'hash' then
    added = call('HSETNX', P .. a, b, '')
  elseif SEEN.layout == 'set64' then
    local key, number = set_bucket(tonumber(b))
    seen_bucket(key, number, true)
    added = call('SADD', key, a)
  else
    local h1, h2 = tonumber(a), tonumber(b)
    if bloom_has(h1, h2) then return 0 end
    if SEEN.n == 0 or SEEN.last >= SEEN.f[SEEN.n].cap then bloom_grow() end
    bloom_set(SEEN.n, h1, h2)
    SEEN.last = SEEN.last + 1
    added = 1
  end
  SEEN.fresh = SEEN.fresh + added
  return added
end

-- 1 if the fingerprint is in the seen set (bloom: may be a false positive), 0 if not.
local function seen_has(a, b)
  if SEEN.layout == 'hash' then return call('HEXISTS', P .. a, b) end
  if SEEN.layout == 'set64' then
    local key, number = set_bucket(tonumber(b))
    local found = call('SISMEMBER', key, a)
    if found == 0 then seen_bucket(key, number, false) end
    return found
  end
  if bloom_has(tonumber(a), tonumber(b)) then return 1 end
  return 0
end

-- After the adds of a step: the seen counter, and (set64) the buckets split while they are over
-- their fill on average, a bounded number a step (the rest in later steps); (bloom) the last
-- filter's count.
local function seen_close()
  if SEEN.fresh == 0 then return end
  call('HINCRBY', META, 'seen', SEEN.fresh)
  if SEEN.layout == 'set64' then
    local count = SEEN.count + SEEN.fresh
    local limit = 2 + math.floor(SEEN.fresh / SEEN.fill)
    local level, split = SEEN.level, SEEN.split
    while limit > 0 and count > SEEN.fill * (2 ^ SEEN.level + SEEN.split) do
      split_one()
      limit = limit - 1
    end
    if level ~= SEEN.level or split ~= SEEN.split then
      call('HSET', META, 'seen_level', SEEN.level, 'seen_split', SEEN.split)
    end
  elseif SEEN.layout == 'bloom' then
    call('HSET', META, 'bloom_last', SEEN.last)
  end
end
"""

# ARGV: count, then per request: seen key ('' for dont_filter), seen field, host, priority,
# body, not_before. Returns 1 (queued) or 0 (a duplicate) per request.
PUSH = _COMMON + _SEEN + r"""
local cs = crawl_settings()
local now = cs.now
seen_open()
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
if added > 0 then
  call('HSET', META, 'seq', seq, 'pending', cs.pending + added, 'pushed', cs.pushed + added)
end
seen_close()
if dups > 0 then call('HINCRBY', META, 'duplicates', dups) end
place_all(touched, now, cs)
return out
"""

# ARGV: how many (at most), lease seconds, the client's id. Returns {count, state, then per
# request: id, body, lease token, lease expiry}; state (when fewer than asked were ready) is
# "next-event now pending in-flight paused" (next-event empty if nothing waits for a time; paused
# 1 if the crawl is paused, 0 if not). A paused crawl hands out nothing (leases that ran out are
# still taken back, and what is due still released).
POP = _COMMON + r"""
local cs = crawl_settings()
local now = cs.now
local want, lease, client = tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3]
local touched = {}
reclaim(now, 1000, touched)
release(now, 1000, touched)
place_all(touched, now, cs)
local out = {0, ''}
local got = 0
while not cs.paused and got < want do
  local best = call('ZRANGE', READY, 0, 0)
  if #best == 0 then break end
  local member = best[1]
  local id, host = string.sub(member, 1, 12), string.sub(member, 13)
  local hk = P .. 'h:' .. host
  local body = call('HGET', REQ, id)
  if not body then damaged(REQ .. ' has no request ' .. id .. ' (named by ' .. READY .. ')') end
  head(body, id)
  if call('ZREM', P .. 'q:' .. host, id) == 0 then
    damaged(READY .. ' names request ' .. id .. ' of ' .. host .. ', which is not in ' .. P .. 'q:' .. host)
  end
  call('HINCRBY', hk, 'i', 1)
  call('HINCRBY', hk, 'p', -1)
  call('HSET', hk, 't', tostring(now))
  place(host, now, cs)
  local expiry = now + lease
  local token = client .. ':' .. call('HINCRBY', META, 'leases', 1)
  call('ZADD', LEASE, expiry, id)
  call('HSET', OWNER, id, token)
  got = got + 1
  out[#out + 1] = id
  out[#out + 1] = body
  out[#out + 1] = token
  out[#out + 1] = tostring(expiry)
end
if got > 0 then
  call('HINCRBY', META, 'pending', -got)
  call('HINCRBY', META, 'inflight', got)
end
out[1] = got
if got < want then
  local c = call('HMGET', META, 'pending', 'inflight')
  audit(tonumber(c[1]))
  out[2] = next_event() .. ' ' .. tostring(now) .. ' ' .. (c[1] or '0') .. ' ' .. (c[2] or '0') .. ' '
           .. (cs.paused and '1' or '0')
end
return out
"""

# ARGV: what ('done', 'retry', 'refetch', 'release', 'extend', 'fail'), seconds, count, then per
# request: id, lease token, new body (retry/refetch: the request as it is now, attempts set;
# fail: the time, f64, and the error text, kept in the failinfo hash beside the request).
# Returns per request 1 (done) or 0 (the lease was lost: another client may hold it).
FINISH = _COMMON + r"""
local cs = crawl_settings()
local now = cs.now
local what, seconds, n = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local out, touched = {}, {}
local done, moved, back, requeued, failed = 0, 0, 0, 0, 0
local seq = nil
for k = 0, n - 1 do
  local id, token, body = ARGV[4 + k * 3], ARGV[5 + k * 3], ARGV[6 + k * 3]
  if call('HGET', OWNER, id) ~= token then
    out[k + 1] = 0
  elseif not call('ZSCORE', LEASE, id) then
    damaged(LEASE .. ' has no lease for request ' .. id .. ' (' .. OWNER .. ' has its token)')
  elseif what == 'extend' then
    call('ZADD', LEASE, now + seconds, id)
    out[k + 1] = 1
  else
    out[k + 1] = 1
    local old = call('HGET', REQ, id)
    local priority, host = head(old, id)
    local hk = P .. 'h:' .. host
    call('ZREM', LEASE, id)
    call('HDEL', OWNER, id)
    call('HINCRBY', hk, 'i', -1)
    touched[host] = true
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
    else
      call('HDEL', REQ, id)
      if what ~= 'retry' then
        call('HINCRBY', hk, 'd', 1)
        call('HDEL', hk, 'f')  -- a done ends the host's failure streak
        done = done + 1
      end
      if what ~= 'done' then
        if seq == nil then seq = num(call('HGET', META, 'seq'), META .. ' field seq') end
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
end
place_all(touched, now, cs)
return out
"""

# ARGV: host, field ('dl' delay, 'b' blocked until, 'bu' budget), value ('' removes it).
SET_HOST = _COMMON + r"""
local cs = crawl_settings()
local host, field, value = ARGV[1], ARGV[2], ARGV[3]
local hk = P .. 'h:' .. host
if value == '' then call('HDEL', hk, field) else call('HSET', hk, field, value) end
call('SADD', HOSTS, host)
place(host, cs.now, cs)
return 1
"""

# ARGV: host, block_after, backoff, backoff_max. One more consecutive failure of the host (field
# 'f'); from block_after on it is blocked (field 'b', never shortened) for backoff seconds doubled
# for each failure past block_after, at most backoff_max. Returns {failures, blocked until or ''}.
HOST_FAILED = _COMMON + r"""
local cs = crawl_settings()
local host = ARGV[1]
local after, backoff, most = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local hk = P .. 'h:' .. host
local failures = call('HINCRBY', hk, 'f', 1)
call('SADD', HOSTS, host)
if failures < after then
  return {failures, ''}
end
local steps = failures - after
if steps > 64 then steps = 64 end
local seconds = backoff * 2 ^ steps
if seconds > most then seconds = most end
local blocked = num(call('HGET', hk, 'b'), hk .. ' field b', true) or 0
local til = cs.now + seconds
if til > blocked then
  call('HSET', hk, 'b', string.format('%.17g', til))
  blocked = til
end
place(host, cs.now, cs)
return {failures, string.format('%.17g', blocked)}
"""

# ARGV: none. Reclaims run-out leases and releases what is due; returns
# {pending, in flight, ready now (0/1), next event, now, paused (0/1)}.
LOOK = _COMMON + r"""
local cs = crawl_settings()
local now = cs.now
local touched = {}
reclaim(now, 1000, touched)
release(now, 1000, touched)
place_all(touched, now, cs)
local c = call('HMGET', META, 'pending', 'inflight')
local ready = call('ZCARD', READY)
if ready == 0 then audit(tonumber(c[1])) end
return {tonumber(c[1]), tonumber(c[2]), ready, next_event(), tostring(now), cs.paused and 1 or 0}
"""

# ARGV: count, then the two seen values per fingerprint. Marks them seen; returns how many were new.
MARK_SEEN = _COMMON + _SEEN + r"""
crawl_settings()
seen_open()
local n = tonumber(ARGV[1])
for k = 0, n - 1 do seen_add(ARGV[2 + k * 2], ARGV[3 + k * 2]) end
seen_close()
return SEEN.fresh
"""

# ARGV: the two seen values of each fingerprint. Returns per fingerprint 1 if it is in the seen set (with a
# Bloom filter: maybe), 0 if not. Reads only (no check of the crawl's counters: a lookup, as HEXISTS was).
HAS_SEEN = _COMMON + _SEEN + r"""
if call('EXISTS', META) == 0 then error({err = 'DFNOCRAWL'}) end
seen_open()
local out = {}
for k = 1, #ARGV - 1, 2 do out[#out + 1] = seen_has(ARGV[k], ARGV[k + 1]) end
return out
"""

# ARGV: count, then per request: seen key and field ('' and '': dont_filter), body (attempts set), and
# its failinfo (the time, f64, and the error text). Stores each as a failed request under a new id, marks
# its fingerprint seen and counts it in its host's done count, as FINISH's 'fail' does. Returns the count.
RECORD_FAILED = _COMMON + _SEEN + r"""
local cs = crawl_settings()
seen_open()
local n = tonumber(ARGV[1])
local seq = num(call('HGET', META, 'seq'), META .. ' field seq')
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
"""

# ARGV: host, done count. Sets a host's done count (a crawl copied in keeps its hosts' counts).
SET_DONE = _COMMON + r"""
local cs = crawl_settings()
local hk = P .. 'h:' .. ARGV[1]
local before = num(call('HGET', hk, 'd'), hk .. ' field d', true) or 0
call('HSET', hk, 'd', ARGV[2])
call('SADD', HOSTS, ARGV[1])
call('HINCRBY', META, 'done', tonumber(ARGV[2]) - before)
place(ARGV[1], cs.now, cs)  -- a budget counts done requests
return 1
"""

# ARGV: the format versions this client reads (space-separated; the first is a new crawl's unless a pair
# below sets 'v'), order, delay, per_host, prefer, seen bucket bits ('' each: keep, or the
# default for a new crawl), 'create' or 'open', the order of a new crawl when none is asked for, the
# copy mark of a new crawl ('': none; a crawl made by 'copy' is marked in the same step) and the value of a
# new crawl's sentinel ('1' for a crawl of one shard, 'i/N' for shard i > 0 of N; '' for shard 0 of several,
# whose sentinel SEAL makes once every shard is there).
# Then pairs of a field and its value that a new crawl's meta gets too (its shards: 'shards' and 'tags'
# in shard 0's, 'shard' and 'crawl' in another's).
# Returns {1, order, delay, per_host, prefer, bits, changed, made, shards, tags, shard, crawl, seen_layout,
# seen_fill, bloom_rate, v, the field sentinel, the sentinel's value, lost_seen, lost_requests, lost_shard},
# {0} (no such crawl, not created) or {-1, version} (a format this version cannot read); changed is 1 when
# delay, per_host or prefer of an existing crawl changed, so that its hosts must be placed again (REPLACE);
# made is 1 when this call made the crawl.
# A new crawl's seen layout comes in these pairs too: 'seen_layout' ('set64' or 'bloom'; none: 'hash')
# with 'seen_level', 'seen_split', 'seen_fill' (set64) or 'bloom_rate', 'bloom_filters', 'bloom_last'.
OPEN = r"""
local META = KEYS[1]
local P = string.sub(META, 1, -5)
local SENTINEL = P .. 'sentinel'
local version, order, delay, per_host, prefer, bits, mode, new_order, mark, sentinel = unpack(ARGV, 1, 10)
local changed, made = 0, 0
local readable = {}
for each in string.gmatch(version, '%S+') do readable[each] = true end
version = string.match(version, '%S+')
local kind = redis.call('TYPE', META)['ok']
if kind ~= 'none' and kind ~= 'hash' then
  error({err = 'DFDAMAGED ' .. META .. ' is a ' .. kind .. ', not a hash'})
end
if kind == 'none' then
  if mode ~= 'create' then return {0} end
  if redis.call('EXISTS', SENTINEL) == 1 then  -- made with the crawl and deleted after its meta: the meta went
    error({err = 'DFDAMAGED ' .. META .. ' is gone while ' .. SENTINEL .. ' is there: the settings, counters and '
                 .. 'shards of the crawl were deleted or evicted'})
  end
  redis.call('HSET', META, 'v', version, 'order', order ~= '' and order or new_order,
             'delay', delay ~= '' and delay or '0', 'per_host', per_host ~= '' and per_host or '0',
             'prefer', prefer ~= '' and prefer or 'priority', 'bits', bits, 'seq', 0, 'pending', 0,
             'inflight', 0, 'delayed', 0, 'done', 0, 'seen', 0, 'created', redis.call('TIME')[1])
  if sentinel ~= '' then
    redis.call('SET', SENTINEL, sentinel)
    redis.call('HSET', META, 'sentinel', 1)
  end
  if mark ~= '' then redis.call('HSET', META, 'copying', mark) end
  for k = 11, #ARGV - 1, 2 do redis.call('HSET', META, ARGV[k], ARGV[k + 1]) end
  made = 1
else
  local have = redis.call('HGET', META, 'v')
  -- ('1s', '2s': a shard of a crawl of several shards, which a client from before shards must refuse; '2':
  -- a seen set of 64-bit keys or a Bloom filter, which a client from before them must refuse)
  if not have or not readable[have] then return {-1, have or ''} end
  -- A crawl made before the sentinel: its sentinel is made now. One whose field went while the key
  -- stayed gets the field back. Shard 0 of several is left to SEAL, the others to the client (a crawl
  -- whose sentinel went is left as it is: the client names the damage).
  if not redis.call('HGET', META, 'sentinel') then
    if redis.call('EXISTS', SENTINEL) == 1 then
      redis.call('HSET', META, 'sentinel', 1)
    elseif not redis.call('HGET', META, 'shards') and not redis.call('HGET', META, 'shard') then
      redis.call('SET', SENTINEL, '1')
      redis.call('HSET', META, 'sentinel', 1)
    end
  end
  if not redis.call('HGET', META, 'delayed') then
    redis.call('HSET', META, 'delayed', redis.call('ZCARD', P .. 'delayed'))
  end
  local before = redis.call('HMGET', META, 'delay', 'per_host', 'prefer')
  if delay ~= '' then redis.call('HSET', META, 'delay', delay) end
  if per_host ~= '' then redis.call('HSET', META, 'per_host', per_host) end
  if prefer ~= '' then redis.call('HSET', META, 'prefer', prefer) end
  local after = redis.call('HMGET', META, 'delay', 'per_host', 'prefer')
  if tonumber(before[1]) ~= tonumber(after[1]) or tonumber(before[2]) ~= tonumber(after[2])
     or before[3] ~= after[3] then
    changed = 1
  end
end
local s = redis.call('HMGET', META, 'order', 'delay', 'per_host', 'prefer', 'bits', 'shards', 'tags', 'shard',
                    'crawl', 'seen_layout', 'seen_fill', 'bloom_rate', 'v', 'sentinel', 'lost_seen',
                    'lost_requests', 'lost_shard')
return {1, s[1], s[2], s[3], s[4], s[5], changed, made, s[6], s[7], s[8], s[9], s[10], s[11], s[12], s[13], s[14],
        redis.call('GET', SENTINEL), s[15], s[16], s[17]}
"""

# ARGV: the value of this shard's sentinel ('i/N', or '1' for a crawl of one shard). Makes the shard's
# sentinel once its crawl is whole (shard 0's: every shard is there), or gives a shard of a crawl made
# before sentinels named their shard its value in place of '1'. Returns 1, or 0 if the shard is gone;
# a sentinel of any other value, or gone while meta says it was made, is damage.
SEAL = r"""
local META = KEYS[1]
local SENTINEL = string.sub(META, 1, -5) .. 'sentinel'
if redis.call('EXISTS', META) == 0 then return 0 end
local have = redis.call('GET', SENTINEL)
if have ~= ARGV[1] then
  if have and have ~= '1' then
    error({err = 'DFDAMAGED ' .. SENTINEL .. ' is ' .. have .. ', not ' .. ARGV[1]})
  end
  if not have and redis.call('HGET', META, 'sentinel') then
    error({err = 'DFDAMAGED ' .. SENTINEL .. ' is gone: Redis evicted keys of the crawl or something deleted them'})
  end
  redis.call('SET', SENTINEL, ARGV[1])
end
redis.call('HSET', META, 'sentinel', 1)
return 1
"""

# ARGV: the first bucket, how many. The check of a shard's seen set made at open: each bucket of
# [first, first + how many) whose MAP bit is set is there (seen_bucket), and one that is there has its
# bit (a bucket made by a client from before the map gets it here: its bit only ever says a bucket was
# made); with the Bloom filter, every part of every filter (first 0), and its count against the filters'.
# The call that ends the walk marks the crawl as mapped (meta field seen_map). Returns {stamp, held,
# next}: the seen count, level and split read (a client compares held, summed over calls of one stamp,
# with the count), what the buckets looked at hold, and the next bucket ('' at the end). A 'hash' crawl is
# not checked.
SEEN_CHECK = _COMMON + _SEEN + r"""
if call('EXISTS', META) == 0 then error({err = 'DFNOCRAWL'}) end
seen_open()
local first, many = tonumber(ARGV[1]), tonumber(ARGV[2])
local stamp = string.format('%.0f:%s:%s', SEEN.count, tostring(SEEN.level), tostring(SEEN.split))
if SEEN.layout == 'hash' then return {stamp, SEEN.count, ''} end
if SEEN.mapped and SEEN.count > 0 and call('EXISTS', MAP) == 0 then
  damaged(MAP .. ' is gone: Redis evicted it or something deleted it (it tells which seen buckets must be there)')
end
-- One bucket: checked, or given its bit if a client from before the map made it; returns what it holds.
local function look(key, bit, size)
  local n = call(size, key)
  if n == 0 then
    seen_bucket(key, bit, false)
  elseif call('GETBIT', MAP, bit) == 0 then
    call('SETBIT', MAP, bit, 1)
  end
  return n
end
local held, after = 0, ''
if SEEN.layout == 'set64' then
  local buckets = 2 ^ SEEN.level + SEEN.split
  local last = math.min(first + many, buckets) - 1
  for b = first, last do held = held + look(P .. 'k:' .. string.format('%x', b), b, 'SCARD') end
  if last + 1 < buckets then after = tostring(last + 1) end
else
  local counted = SEEN.n > 0 and SEEN.last or 0
  for i = 1, SEEN.n do
    if i < SEEN.n then counted = counted + SEEN.f[i].cap end
    for part = 0, SEEN.f[i].parts - 1 do look(P .. 'b:' .. i .. ':' .. part, SEEN.f[i].offset + part, 'STRLEN') end
  end
  if counted ~= SEEN.count then
    damaged(META .. ' field seen counts ' .. SEEN.count .. ' fingerprints; the Bloom filters count ' .. counted)
  end
  held = SEEN.count
end
if after == '' and not SEEN.mapped then call('HSET', META, 'seen_map', 1) end
return {stamp, held, after}
"""

# ARGV: host names. Places each host again under the crawl's settings (after OPEN changed them).
REPLACE = _COMMON + r"""
local cs = crawl_settings()
local now = cs.now
for _, host in ipairs(ARGV) do place(host, now, cs) end
return #ARGV
"""

# ARGV: at most how many (0: all). Failed requests are pending again (attempts 0), oldest
# failure first. Returns how many.
REQUEUE_FAILED = _COMMON + r"""
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
local seq = num(call('HGET', META, 'seq'), META .. ' field seq')
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
"""

# ARGV: '1' pause, '0' resume. A pause is the meta field paused (the time it began, the server's
# clock); pausing a paused crawl keeps its time. Returns that time ('' once resumed).
SET_PAUSE = _COMMON + r"""
local cs = crawl_settings()
if ARGV[1] ~= '1' then
  call('HDEL', META, 'paused')
  return ''
end
if not cs.paused then call('HSET', META, 'paused', string.format('%.6f', cs.now)) end
return call('HGET', META, 'paused')
"""

# Dropping pending requests: each leaves req, its place (its host's queue, or delayed) and every
# count (the host's p, meta's pending and delayed), and is counted in meta's dropped; its host is
# placed again. Its fingerprint stays seen. Leased and failed requests are never touched.
_DROP = r"""
-- Counts and placement after ``n`` requests were dropped: ``of`` host -> how many, ``delayed`` of them
-- from DELAYED, ``touched`` the hosts whose queues lost some.
local function dropped(n, of, delayed, touched, cs)
  if n == 0 then return end
  for host, k in pairs(of) do call('HINCRBY', P .. 'h:' .. host, 'p', -k) end
  call('HINCRBY', META, 'pending', -n)
  call('HINCRBY', META, 'dropped', n)
  if delayed > 0 then
    call('HINCRBY', META, 'delayed', -delayed)
    delayed_now = delayed_now - delayed
  end
  place_all(touched, cs.now, cs)
end
"""

# ARGV: host, phase, cursor, batch, dry ('1': count, change nothing), show. Phase 'd': one ZSCAN
# step of delayed from cursor (about batch entries), dropping those of the host; phase 'q': drops up
# to batch requests from the head of the host's queue (a dry run counts it whole). Returns {count,
# the next cursor ('0': the phase is over), then the id and body of each of the first show of them}.
DROP_HOST = _COMMON + _DROP + r"""
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
"""

# ARGV: dry ('1': count, change nothing), then request ids. Drops each that is pending now (in its
# host's queue or in delayed: not leased, done or failed). Returns 1 (dropped, or with dry: would be)
# or 0 per id.
DROP_IDS = _COMMON + _DROP + r"""
local cs = crawl_settings()
local dry = ARGV[1] == '1'
local out, of, touched = {}, {}, {}
local count, delayed = 0, 0
for k = 2, #ARGV do
  local id = ARGV[k]
  local body = call('HGET', REQ, id)
  out[k - 1] = 0
  if body then
    local _, host = head(body, id)
    local q = P .. 'q:' .. host
    local where = nil
    if call('ZSCORE', DELAYED, id) then
      where = DELAYED
    elseif call('ZSCORE', q, id) then
      where = q
    end
    if where then
      out[k - 1] = 1
      if not dry then
        call('ZREM', where, id)
        call('HDEL', REQ, id)
        of[host] = (of[host] or 0) + 1
        count = count + 1
        if where == DELAYED then delayed = delayed + 1 else touched[host] = true end
      end
    end
  end
end
dropped(count, of, delayed, touched, cs)
return out
"""

# The clients of a crawl: the hash ``clients``, client id -> JSON {host, pid, lease, beat, started, seen}
# (started and seen: the server's clock; beat: how often its renewal says it is there, null without one).
# A client is live while now - seen < 2 beats (without beats: its lease).
_CLIENTS = r"""
local CLIENTS = P .. 'clients'
local FORGOTTEN_AFTER = 3600  -- seconds: at least this long (and 10 of its leases) before a dead client's entry goes

-- Record ``client`` (its JSON ``info``: host, pid, lease) as seen now, keeping when it started.
local function beat(client, info, now)
  local ok, entry = pcall(cjson.decode, info)
  if not ok or type(entry) ~= 'table' then error({err = 'ERR client info is not a JSON object'}) end
  local started = now
  local old = call('HGET', CLIENTS, client)
  if old then
    local fine, was = pcall(cjson.decode, old)
    if fine and type(was) == 'table' and tonumber(was.started) then started = tonumber(was.started) end
  end
  entry.started, entry.seen = started, now
  call('HSET', CLIENTS, client, cjson.encode(entry))
end

-- Remove the entries of clients unseen for longer than max(10 leases, FORGOTTEN_AFTER); entries that
-- cannot be read go too (they are only ever written here).
local function forget_dead(now)
  local all = call('HGETALL', CLIENTS)
  for k = 1, #all, 2 do
    local ok, entry = pcall(cjson.decode, all[k + 1])
    local seen = ok and type(entry) == 'table' and tonumber(entry.seen)
    local lease = ok and type(entry) == 'table' and tonumber(entry.lease) or 0
    if not seen or now - seen > math.max(10 * lease, FORGOTTEN_AFTER) then call('HDEL', CLIENTS, all[k]) end
  end
end
"""

# ARGV: client id, its info (JSON: host, pid, lease), 'open' (also forget long-dead clients) or 'beat',
# lease seconds, count, then per request: id, lease token. Records the client as seen now and renews
# each lease for the seconds given (FINISH's 'extend'), in one step. Returns {now, then per request 1
# (renewed) or 0 (the lease was lost)}.
BEAT = _COMMON + _CLIENTS + r"""
local cs = crawl_settings()
local now = cs.now
local client, info, mode, seconds, n = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4]), tonumber(ARGV[5])
if mode == 'open' then forget_dead(now) end
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
"""

# ARGV: client id. Removes the client's entry (a client that closes); a crawl that is gone stays gone.
LEAVE = r"""
local P = string.sub(KEYS[1], 1, -5)
return redis.call('HDEL', P .. 'clients', ARGV[1])
"""

# ARGV: client id, then request ids. Gives back those still leased to that client (their token is
# 'client:n') as a lease that ran out is taken back: pending again at their place, counted in
# reclaimed. Returns how many.
GIVE_BACK = _COMMON + r"""
local cs = crawl_settings()
local prefix = ARGV[1] .. ':'
local ids, touched = {}, {}
for k = 2, #ARGV do
  local token = call('HGET', OWNER, ARGV[k])
  if token and string.sub(token, 1, #prefix) == prefix then ids[#ids + 1] = ARGV[k] end
end
local count = take_back(ids, touched)
place_all(touched, cs.now, cs)
return count
"""

# ARGV: at most how many. Takes back leases that ran out (what a pop does first). Returns how many.
RECLAIM = _COMMON + r"""
local cs = crawl_settings()
local touched = {}
local count = reclaim(cs.now, tonumber(ARGV[1]), touched)
place_all(touched, cs.now, cs)
return count
"""
