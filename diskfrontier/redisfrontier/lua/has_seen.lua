-- HAS_SEEN: look fingerprints up in the seen set (has_seen, mark_seen across shards).
-- uses: common, seen
--
-- ARGV: the two seen values of each fingerprint. Returns per fingerprint 1 if it is in the seen set (with a
-- Bloom filter: maybe), 0 if not. Reads only (no check of the crawl's counters: a lookup, as HEXISTS was).

if call('EXISTS', META) == 0 then error({err = 'DFNOCRAWL'}) end
seen_open()
local out = {}
for k = 1, #ARGV - 1, 2 do out[#out + 1] = seen_has(ARGV[k], ARGV[k + 1]) end
return out
