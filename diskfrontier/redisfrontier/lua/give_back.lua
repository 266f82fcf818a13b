-- GIVE_BACK: give back the leases of one client ('diskfrontier release --client').
-- uses: common
--
-- ARGV: client id, then request ids. Gives back those still leased to that client (their token is
-- 'client:n') as a lease that ran out is taken back: pending again at their place, counted in
-- reclaimed. Returns how many.

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
