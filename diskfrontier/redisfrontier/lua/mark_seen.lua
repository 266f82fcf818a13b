-- MARK_SEEN: add fingerprints to the seen set (mark_seen).
-- uses: common, seen
--
-- ARGV: count, then the two seen values per fingerprint. Marks them seen; returns how many were new.

crawl_settings()
seen_open()
local n = tonumber(ARGV[1])
for k = 0, n - 1 do seen_add(ARGV[2 + k * 2], ARGV[3 + k * 2]) end
seen_close()
return SEEN.fresh
