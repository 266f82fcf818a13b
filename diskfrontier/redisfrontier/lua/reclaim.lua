-- RECLAIM: take back every lease that ran out ('diskfrontier release --expired').
-- uses: common
--
-- ARGV: at most how many. Takes back leases that ran out (what a pop does first). Returns how many.

local cs = crawl_settings()
local touched = {}
local count = reclaim(cs.now, tonumber(ARGV[1]), touched)
place_all(touched, cs.now, cs)
return count
