-- REPLACE: place hosts again under the crawl's settings (an open that changed them, verify --repair).
-- uses: common
--
-- ARGV: host names. Places each host again under the crawl's settings (after OPEN changed them).

local cs = crawl_settings()
local now = cs.now
for _, host in ipairs(ARGV) do place(host, now, cs) end
return #ARGV
