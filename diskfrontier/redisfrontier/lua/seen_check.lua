-- SEEN_CHECK: walk a shard's seen buckets at open, checking each is there that must be.
-- uses: common, seen
--
-- ARGV: the first bucket, how many. The check of a shard's seen set made at open: each bucket of
-- [first, first + how many) whose MAP bit is set is there (seen_bucket), and one that is there has its
-- bit (a bucket made by a client from before the map gets it here: its bit only ever says a bucket was
-- made); with the Bloom filter, every part of every filter (first 0), and its count against the filters'.
-- The call that ends the walk marks the crawl as mapped (meta field seen_map). Returns {stamp, held,
-- next}: the seen count, level and split read (a client compares held, summed over calls of one stamp,
-- with the count), what the buckets looked at hold, and the next bucket ('' at the end). A 'hash' crawl is
-- not checked.

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
