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
local REQ, OWNER, HOSTS = P .. 'req', P .. 'owner', P .. 'hosts'
local FOREVER = 1e18

local function clock()
  local t = redis.call('TIME')
  return tonumber(t[1]) + tonumber(t[2]) / 1000000
end

local function crawl_settings()
  local s = redis.call('HMGET', META, 'order', 'delay', 'per_host', 'prefer')
  if not s[1] then error({err = 'DFNOCRAWL'}) end
  local per_host = tonumber(s[3]) or 0
  if per_host <= 0 then per_host = nil end
  return {lifo = s[1] == 'lifo', delay = tonumber(s[2]) or 0, per_host = per_host, idle = s[4] == 'idle'}
end

local function id_of(seq, lifo)
  if lifo then return string.format('%012x', 281474976710656 - seq) end
  return string.format('%012x', seq)
end

local function head(body)
  local priority, flags, attempts, not_before, slotlen, at = struct.unpack('>iBHdB', body)
  return priority, string.sub(body, at, at + slotlen - 1), attempts, not_before
end

-- Put a host in the ready set or the waiting set as its state calls for (or in neither,
-- when it has nothing pending or a count holds it back).
local function place(host, now, cs)
  local hk = P .. 'h:' .. host
  local h = redis.call('HMGET', hk, 'r', 'i', 'd', 'dl', 'b', 'bu', 't')
  if h[1] then
    redis.call('ZREM', READY, h[1])
    redis.call('HDEL', hk, 'r')
  end
  redis.call('ZREM', WAIT, host)
  local top = redis.call('ZRANGE', P .. 'q:' .. host, 0, 0, 'WITHSCORES')
  if #top == 0 then return end
  local inflight = tonumber(h[2]) or 0
  if cs.per_host and inflight >= cs.per_host then return end
  local budget = tonumber(h[6])
  if budget and (tonumber(h[3]) or 0) + inflight >= budget then return end
  local delay = tonumber(h[4]) or cs.delay
  local wake = 0
  if h[7] and delay > 0 then wake = tonumber(h[7]) + delay end
  local blocked = tonumber(h[5]) or 0
  if blocked > wake then wake = blocked end
  if wake > now then
    redis.call('ZADD', WAIT, wake, host)
    return
  end
  local score = tonumber(top[2])
  if cs.idle then score = inflight * 8589934592 + score + 2147483648 end
  local member = top[1] .. host
  redis.call('ZADD', READY, score, member)
  redis.call('HSET', hk, 'r', member)
end

local function place_all(touched, now, cs)
  for host in pairs(touched) do place(host, now, cs) end
end

-- A pending request goes into its host's queue (or waits for its time).
local function enqueue(id, host, priority, not_before, now, touched)
  if not_before > now then
    redis.call('ZADD', DELAYED, not_before, id)
  else
    redis.call('ZADD', P .. 'q:' .. host, -priority, id)
    touched[host] = true
  end
end

-- Leases that ran out: the requests are pending again, at their place.
local function reclaim(now, limit, touched)
  local ids = redis.call('ZRANGEBYSCORE', LEASE, '-inf', now, 'LIMIT', 0, limit)
  for _, id in ipairs(ids) do
    local body = redis.call('HGET', REQ, id)
    redis.call('ZREM', LEASE, id)
    redis.call('HDEL', OWNER, id)
    if body then
      local priority, host = head(body)
      redis.call('ZADD', P .. 'q:' .. host, -priority, id)
      local hk = P .. 'h:' .. host
      redis.call('HINCRBY', hk, 'i', -1)
      redis.call('HINCRBY', hk, 'p', 1)
      touched[host] = true
    end
  end
  if #ids > 0 then
    redis.call('HINCRBY', META, 'inflight', -#ids)
    redis.call('HINCRBY', META, 'pending', #ids)
    redis.call('HINCRBY', META, 'reclaimed', #ids)
  end
end

-- Requests whose not_before has come join their host's queue; hosts whose time has come wake.
local function release(now, limit, touched)
  local ids = redis.call('ZRANGEBYSCORE', DELAYED, '-inf', now, 'LIMIT', 0, limit)
  for _, id in ipairs(ids) do
    redis.call('ZREM', DELAYED, id)
    local body = redis.call('HGET', REQ, id)
    if body then
      local priority, host = head(body)
      redis.call('ZADD', P .. 'q:' .. host, -priority, id)
      touched[host] = true
    end
  end
  local hosts = redis.call('ZRANGEBYSCORE', WAIT, '-inf', now, 'LIMIT', 0, limit)
  for _, host in ipairs(hosts) do touched[host] = true end
end

-- True if only a call can let a host hand out again: blocked for ever, or at its budget with
-- nothing leased.
local function held_for_ever(host)
  local h = redis.call('HMGET', P .. 'h:' .. host, 'b', 'bu', 'd', 'i')
  if (tonumber(h[1]) or 0) >= FOREVER then return true end
  local budget = tonumber(h[2])
  return budget ~= nil and (tonumber(h[4]) or 0) == 0 and (tonumber(h[3]) or 0) >= budget
end

-- The due time of the first request waiting for a time whose host waiting alone can free
-- (nil if none); past 64 of held hosts, the next one's time.
local function next_due()
  local first = redis.call('ZRANGE', DELAYED, 0, 64, 'WITHSCORES')
  for k = 1, #first, 2 do
    if k > 128 then return tonumber(first[k + 1]) end
    local body = redis.call('HGET', REQ, first[k])
    if not body then return tonumber(first[k + 1]) end
    local _, host = head(body)
    if not held_for_ever(host) then return tonumber(first[k + 1]) end
  end
  return nil
end

-- The earliest time anything held back by time may become ready (an empty string if none).
local function next_event()
  local best = next_due()
  for _, key in ipairs({WAIT, LEASE}) do
    local first = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
    if #first > 0 then
      local t = tonumber(first[2])
      if t < FOREVER and (best == nil or t < best) then best = t end
    end
  end
  if best == nil then return '' end
  return tostring(best)
end
"""

# ARGV: count, then per request: seen key ('' for dont_filter), seen field, host, priority,
# body, not_before. Returns 1 (queued) or 0 (a duplicate) per request.
PUSH = _COMMON + r"""
local cs = crawl_settings()
local now = clock()
local n = tonumber(ARGV[1])
local out, touched, added, fresh_seen, dups = {}, {}, 0, 0, 0
local seq = tonumber(redis.call('HGET', META, 'seq') or '0')
for k = 0, n - 1 do
  local a = 2 + k * 6
  local seen_key, host = ARGV[a], ARGV[a + 2]
  local fresh = true
  if seen_key ~= '' then
    fresh = redis.call('HSETNX', P .. seen_key, ARGV[a + 1], '') == 1
    if fresh then fresh_seen = fresh_seen + 1 end
  end
  if fresh then
    seq = seq + 1
    local id = id_of(seq, cs.lifo)
    redis.call('HSET', REQ, id, ARGV[a + 4])
    enqueue(id, host, tonumber(ARGV[a + 3]), tonumber(ARGV[a + 5]), now, touched)
    redis.call('SADD', HOSTS, host)
    redis.call('HINCRBY', P .. 'h:' .. host, 'p', 1)
    added = added + 1
    out[k + 1] = 1
  else
    dups = dups + 1
    out[k + 1] = 0
  end
end
if added > 0 then
  redis.call('HSET', META, 'seq', seq)
  redis.call('HINCRBY', META, 'pending', added)
  redis.call('HINCRBY', META, 'pushed', added)
end
if fresh_seen > 0 then redis.call('HINCRBY', META, 'seen', fresh_seen) end
if dups > 0 then redis.call('HINCRBY', META, 'duplicates', dups) end
place_all(touched, now, cs)
return out
"""

# ARGV: how many (at most), lease seconds, the client's id. Returns {count, state, then per
# request: id, body, lease token, lease expiry}; state (when fewer than asked were ready) is
# "next-event now pending in-flight" (next-event empty if nothing waits for a time).
POP = _COMMON + r"""
local cs = crawl_settings()
local now = clock()
local want, lease, client = tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3]
local touched = {}
reclaim(now, 1000, touched)
release(now, 1000, touched)
place_all(touched, now, cs)
local out = {0, ''}
local got = 0
while got < want do
  local best = redis.call('ZRANGE', READY, 0, 0)
  if #best == 0 then break end
  local member = best[1]
  local id, host = string.sub(member, 1, 12), string.sub(member, 13)
  local hk = P .. 'h:' .. host
  redis.call('ZREM', P .. 'q:' .. host, id)
  redis.call('HINCRBY', hk, 'i', 1)
  redis.call('HINCRBY', hk, 'p', -1)
  redis.call('HSET', hk, 't', tostring(now))
  place(host, now, cs)
  local expiry = now + lease
  local token = client .. ':' .. redis.call('HINCRBY', META, 'leases', 1)
  redis.call('ZADD', LEASE, expiry, id)
  redis.call('HSET', OWNER, id, token)
  got = got + 1
  out[#out + 1] = id
  out[#out + 1] = redis.call('HGET', REQ, id)
  out[#out + 1] = token
  out[#out + 1] = tostring(expiry)
end
if got > 0 then
  redis.call('HINCRBY', META, 'pending', -got)
  redis.call('HINCRBY', META, 'inflight', got)
end
out[1] = got
if got < want then
  local c = redis.call('HMGET', META, 'pending', 'inflight')
  out[2] = next_event() .. ' ' .. tostring(now) .. ' ' .. (c[1] or '0') .. ' ' .. (c[2] or '0')
end
return out
"""

# ARGV: what ('done', 'retry', 'refetch', 'release', 'extend', 'fail'), seconds, count, then per
# request: id, lease token, new body (retry/refetch: the request as it is now, attempts set;
# fail: the time, f64, and the error text, kept in the failinfo hash beside the request).
# Returns per request 1 (done) or 0 (the lease was lost: another client may hold it).
FINISH = _COMMON + r"""
local cs = crawl_settings()
local now = clock()
local what, seconds, n = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local out, touched = {}, {}
local done, moved, back, requeued, failed = 0, 0, 0, 0, 0
local seq = nil
for k = 0, n - 1 do
  local id, token, body = ARGV[4 + k * 3], ARGV[5 + k * 3], ARGV[6 + k * 3]
  if redis.call('HGET', OWNER, id) ~= token then
    out[k + 1] = 0
  elseif what == 'extend' then
    redis.call('ZADD', LEASE, now + seconds, id)
    out[k + 1] = 1
  else
    out[k + 1] = 1
    local old = redis.call('HGET', REQ, id)
    local priority, host = head(old)
    local hk = P .. 'h:' .. host
    redis.call('ZREM', LEASE, id)
    redis.call('HDEL', OWNER, id)
    redis.call('HINCRBY', hk, 'i', -1)
    touched[host] = true
    if what == 'release' then
      redis.call('ZADD', P .. 'q:' .. host, -priority, id)
      redis.call('HINCRBY', hk, 'p', 1)
      back = back + 1
    elseif what == 'fail' then
      redis.call('HDEL', REQ, id)
      redis.call('HSET', P .. 'failed', id, old)
      redis.call('HSET', P .. 'failinfo', id, body)
      redis.call('HINCRBY', hk, 'd', 1)
      failed = failed + 1
    else
      redis.call('HDEL', REQ, id)
      if what ~= 'retry' then
        redis.call('HINCRBY', hk, 'd', 1)
        done = done + 1
      end
      if what ~= 'done' then
        if seq == nil then seq = tonumber(redis.call('HGET', META, 'seq')) end
        seq = seq + 1
        local new = id_of(seq, cs.lifo)
        local due = 0
        if seconds > 0 then due = now + seconds end
        local stored = string.sub(body, 1, 7) .. struct.pack('>d', due) .. string.sub(body, 16)
        local new_priority, new_host = head(stored)
        redis.call('HSET', REQ, new, stored)
        enqueue(new, new_host, new_priority, due, now, touched)
        redis.call('HINCRBY', P .. 'h:' .. new_host, 'p', 1)
        if new_host ~= host then redis.call('SADD', HOSTS, new_host) end
        requeued = requeued + 1
        if what == 'retry' then moved = moved + 1 end
      end
    end
  end
end
if seq ~= nil then redis.call('HSET', META, 'seq', seq) end
local left = done + moved + back + failed
if failed > 0 then redis.call('HINCRBY', META, 'failed', failed) end
if left > 0 then
  redis.call('HINCRBY', META, 'inflight', -left)
  if done > 0 then redis.call('HINCRBY', META, 'done', done) end
  if back + requeued > 0 then redis.call('HINCRBY', META, 'pending', back + requeued) end
  if moved > 0 then redis.call('HINCRBY', META, 'retried', moved) end
  if requeued > moved then redis.call('HINCRBY', META, 'refetch_scheduled', requeued - moved) end
end
place_all(touched, now, cs)
return out
"""

# ARGV: host, field ('dl' delay, 'b' blocked until, 'bu' budget), value ('' removes it).
SET_HOST = _COMMON + r"""
local cs = crawl_settings()
local host, field, value = ARGV[1], ARGV[2], ARGV[3]
local hk = P .. 'h:' .. host
if value == '' then redis.call('HDEL', hk, field) else redis.call('HSET', hk, field, value) end
redis.call('SADD', HOSTS, host)
place(host, clock(), cs)
return 1
"""

# ARGV: none. Reclaims run-out leases and releases what is due; returns
# {pending, in flight, ready now (0/1), next event}.
LOOK = _COMMON + r"""
local cs = crawl_settings()
local now = clock()
local touched = {}
reclaim(now, 1000, touched)
release(now, 1000, touched)
place_all(touched, now, cs)
local c = redis.call('HMGET', META, 'pending', 'inflight')
local ready = redis.call('ZCARD', READY)
return {tonumber(c[1]) or 0, tonumber(c[2]) or 0, ready, next_event(), tostring(now)}
"""

# ARGV: count, then seen key and field per fingerprint. Marks them seen; returns how many were new.
MARK_SEEN = _COMMON + r"""
crawl_settings()
local n, fresh = tonumber(ARGV[1]), 0
for k = 0, n - 1 do
  fresh = fresh + redis.call('HSETNX', P .. ARGV[2 + k * 2], ARGV[3 + k * 2], '')
end
if fresh > 0 then redis.call('HINCRBY', META, 'seen', fresh) end
return fresh
"""

# ARGV: count, then per request: seen key and field ('' and '': dont_filter), body (attempts set), and
# its failinfo (the time, f64, and the error text). Stores each as a failed request under a new id, marks
# its fingerprint seen and counts it in its host's done count, as FINISH's 'fail' does. Returns the count.
RECORD_FAILED = _COMMON + r"""
local cs = crawl_settings()
local n = tonumber(ARGV[1])
local seq = tonumber(redis.call('HGET', META, 'seq'))
local fresh, touched = 0, {}
for k = 0, n - 1 do
  local key, field, body, info = ARGV[2 + k * 4], ARGV[3 + k * 4], ARGV[4 + k * 4], ARGV[5 + k * 4]
  if key ~= '' then fresh = fresh + redis.call('HSETNX', P .. key, field, '') end
  seq = seq + 1
  local id = id_of(seq, cs.lifo)
  local _, host = head(body)
  redis.call('HSET', P .. 'failed', id, body)
  redis.call('HSET', P .. 'failinfo', id, info)
  redis.call('HINCRBY', P .. 'h:' .. host, 'd', 1)
  redis.call('SADD', HOSTS, host)
  touched[host] = true
end
if n > 0 then
  redis.call('HSET', META, 'seq', seq)
  redis.call('HINCRBY', META, 'failed', n)
end
if fresh > 0 then redis.call('HINCRBY', META, 'seen', fresh) end
place_all(touched, clock(), cs)  -- a budget counts done requests
return n
"""

# ARGV: host, done count. Sets a host's done count (a crawl copied in keeps its hosts' counts).
SET_DONE = _COMMON + r"""
local cs = crawl_settings()
local hk = P .. 'h:' .. ARGV[1]
local before = tonumber(redis.call('HGET', hk, 'd') or '0')
redis.call('HSET', hk, 'd', ARGV[2])
redis.call('SADD', HOSTS, ARGV[1])
redis.call('HINCRBY', META, 'done', tonumber(ARGV[2]) - before)
place(ARGV[1], clock(), cs)  -- a budget counts done requests
return 1
"""

# ARGV: format version, order, delay, per_host, prefer, seen bucket bits ('' each: keep, or the
# default for a new crawl), 'create' or 'open', the order of a new crawl when none is asked for, and
# the copy mark of a new crawl ('': none; a crawl made by 'copy' is marked in the same step).
# Returns {1, order, delay, per_host, prefer, bits, changed, made}, {0} (no such crawl, not created) or
# {-1, version} (a format this version cannot read); changed is 1 when delay, per_host or prefer
# of an existing crawl changed, so that its hosts must be placed again (REPLACE); made is 1 when
# this call made the crawl.
OPEN = r"""
local META = KEYS[1]
local version, order, delay, per_host, prefer, bits, mode, new_order, mark = unpack(ARGV)
local changed, made = 0, 0
if redis.call('EXISTS', META) == 0 then
  if mode ~= 'create' then return {0} end
  redis.call('HSET', META, 'v', version, 'order', order ~= '' and order or new_order,
             'delay', delay ~= '' and delay or '0', 'per_host', per_host ~= '' and per_host or '0',
             'prefer', prefer ~= '' and prefer or 'priority', 'bits', bits, 'seq', 0, 'pending', 0,
             'inflight', 0, 'done', 0, 'seen', 0, 'created', redis.call('TIME')[1])
  if mark ~= '' then redis.call('HSET', META, 'copying', mark) end
  made = 1
else
  local have = redis.call('HGET', META, 'v')
  if have ~= version then return {-1, have or ''} end
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
local s = redis.call('HMGET', META, 'order', 'delay', 'per_host', 'prefer', 'bits')
return {1, s[1], s[2], s[3], s[4], s[5], changed, made}
"""

# ARGV: host names. Places each host again under the crawl's settings (after OPEN changed them).
REPLACE = _COMMON + r"""
local cs = crawl_settings()
local now = clock()
for _, host in ipairs(ARGV) do place(host, now, cs) end
return #ARGV
"""

# ARGV: at most how many (0: all). Failed requests are pending again (attempts 0), oldest
# failure first. Returns how many.
REQUEUE_FAILED = _COMMON + r"""
local cs = crawl_settings()
local now = clock()
local limit = tonumber(ARGV[1])
local info = redis.call('HGETALL', P .. 'failinfo')
local order = {}
for k = 1, #info, 2 do
  order[#order + 1] = {id = info[k], at = struct.unpack('>d', info[k + 1])}
end
table.sort(order, function(a, b) return a.at < b.at end)
local seq = tonumber(redis.call('HGET', META, 'seq'))
local touched, count = {}, 0
for _, entry in ipairs(order) do
  if limit > 0 and count >= limit then break end
  local body = redis.call('HGET', P .. 'failed', entry.id)
  redis.call('HDEL', P .. 'failed', entry.id)
  redis.call('HDEL', P .. 'failinfo', entry.id)
  if body then
    seq = seq + 1
    local id = id_of(seq, cs.lifo)
    local stored = string.sub(body, 1, 5) .. struct.pack('>Hd', 0, 0) .. string.sub(body, 16)
    local priority, host = head(stored)
    redis.call('HSET', REQ, id, stored)
    enqueue(id, host, priority, 0, now, touched)
    redis.call('HINCRBY', P .. 'h:' .. host, 'p', 1)
    count = count + 1
  end
end
if count > 0 then
  redis.call('HSET', META, 'seq', seq)
  redis.call('HINCRBY', META, 'pending', count)
  redis.call('HINCRBY', META, 'failed', -count)
end
place_all(touched, now, cs)
return count
"""
