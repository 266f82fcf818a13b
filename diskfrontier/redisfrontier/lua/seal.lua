-- SEAL: make a shard's sentinel once every shard of its crawl is there (an open).
--
-- ARGV: the value of this shard's sentinel ('i/N', or '1' for a crawl of one shard). Makes the shard's
-- sentinel once its crawl is whole (shard 0's: every shard is there), or gives a shard of a crawl made
-- before sentinels named their shard its value in place of '1'. Returns 1, or 0 if the shard is gone;
-- a sentinel of any other value, or gone while meta says it was made, is damage.

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
