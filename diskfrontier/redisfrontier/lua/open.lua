-- OPEN: make or find a crawl's shard, check its format and apply the settings asked for (an open).
--
-- ARGV: the format versions this client reads (space-separated; the first is a new crawl's unless a pair
-- below sets 'v'), order, delay, per_host, prefer, seen bucket bits ('' each: keep, or the
-- default for a new crawl), 'create' or 'open', the order of a new crawl when none is asked for, the
-- copy mark of a new crawl ('': none; a crawl made by 'copy' is marked in the same step) and the value of a
-- new crawl's sentinel ('1' for a crawl of one shard, 'i/N' for shard i > 0 of N; '' for shard 0 of several,
-- whose sentinel SEAL makes once every shard is there).
-- Then pairs of a field and its value that a new crawl's meta gets too (its shards: 'shards' and 'tags'
-- in shard 0's, 'shard' and 'crawl' in another's).
-- Returns {1, order, delay, per_host, prefer, bits, changed, made, shards, tags, shard, crawl, seen_layout,
-- seen_fill, bloom_rate, v, the field sentinel, the sentinel's value, lost_seen, lost_requests, lost_shard},
-- {0} (no such crawl, not created) or {-1, version} (a format this version cannot read); changed is 1 when
-- delay, per_host or prefer of an existing crawl changed, so that its hosts must be placed again (REPLACE);
-- made is 1 when this call made the crawl.
-- A new crawl's seen layout comes in these pairs too: 'seen_layout' ('set64' or 'bloom'; none: 'hash')
-- with 'seen_level', 'seen_split', 'seen_fill' (set64) or 'bloom_rate', 'bloom_filters', 'bloom_last'.

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
  -- a crawl from before revisits ('1', '2s'...): its records may hold a revisit state from now on, so that a
  -- version from before them, which would take such a record for damage, refuses it ('1r', '2rs'...)
  if not string.find(have, 'r', 1, true) then
    local marked = string.sub(have, 1, 1) .. 'r' .. string.sub(have, 2)
    if readable[marked] then redis.call('HSET', META, 'v', marked) end
  end
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
