-- seen: the crawl's seen set in each of its layouts (hash buckets, 64-bit keys, Bloom filters).
-- uses: common
--
-- The crawl's seen set, in whichever layout the crawl has (meta field seen_layout; absent: 'hash').
-- Each fingerprint comes as two ARGV values: 'hash' bucket key and field; 'set64' the 64-bit key
-- (signed decimal) and its low 32 bits; 'bloom' two 48-bit hashes. See docs/format.md, "Seen set".

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

-- The meta fields seen_open reads (a step may read them with its settings: crawl_settings(SEEN_FIELDS)).
local SEEN_FIELDS = {'seen_layout', 'seen_level', 'seen_split', 'seen_fill', 'seen', 'bloom_rate', 'bloom_filters',
                     'bloom_last', 'v', 'seen_map'}

-- ``read``: the values of SEEN_FIELDS if the step read them already.
local function seen_open(read)
  local s = read or call('HMGET', META, unpack(SEEN_FIELDS))
  if not s[1] and s[9] and string.sub(s[9], 1, 1) ~= '1' then
    damaged(META .. ' field seen_layout is missing (a crawl of format ' .. s[9] .. ' names the layout of its seen set)')
  end
  SEEN = {layout = s[1] or 'hash', count = num(s[5], META, 'field seen'), fresh = 0, checked = {},
          mapped = s[10] ~= false}
  if SEEN.layout == 'set64' then
    SEEN.level = num(s[2], META, 'field seen_level')
    SEEN.split = num(s[3], META, 'field seen_split')
    SEEN.fill = num(s[4], META, 'field seen_fill')
  elseif SEEN.layout == 'bloom' then
    SEEN.rate = num(s[6], META, 'field bloom_rate')
    SEEN.n = num(s[7], META, 'field bloom_filters')
    SEEN.last = num(s[8], META, 'field bloom_last')
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
-- filter's count. ``fields``: a list of meta fields and values the step writes in one HSET, where
-- the seen counter goes instead of a write of its own.
local function seen_close(fields)
  if SEEN.fresh == 0 then return end
  if fields then
    fields[#fields + 1] = 'seen'
    fields[#fields + 1] = SEEN.count + SEEN.fresh
  else
    call('HINCRBY', META, 'seen', SEEN.fresh)
  end
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
