-- DROP_IDS: drop the pending requests among given ids (drop(match=...)).
-- uses: common, drop
--
-- ARGV: dry ('1': count, change nothing), then request ids. Drops each that is pending now (in its
-- host's queue or in delayed: not leased, done or failed). Returns 1 (dropped, or with dry: would be)
-- or 0 per id.

local cs = crawl_settings()
local dry = ARGV[1] == '1'
local out, of, touched = {}, {}, {}
local count, delayed = 0, 0
for k = 2, #ARGV do
  local id = ARGV[k]
  local body = call('HGET', REQ, id)
  out[k - 1] = 0
  if body then
    local _, host = head(body, id)
    local q = P .. 'q:' .. host
    local where = nil
    if call('ZSCORE', DELAYED, id) then
      where = DELAYED
    elseif call('ZSCORE', q, id) then
      where = q
    end
    if where then
      out[k - 1] = 1
      if not dry then
        call('ZREM', where, id)
        call('HDEL', REQ, id)
        of[host] = (of[host] or 0) + 1
        count = count + 1
        if where == DELAYED then delayed = delayed + 1 else touched[host] = true end
      end
    end
  end
end
dropped(count, of, delayed, touched, cs)
return out
