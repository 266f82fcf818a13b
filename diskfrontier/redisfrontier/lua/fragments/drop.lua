-- drop: the counts and placement after pending requests are dropped.
-- uses: common
--
-- Dropping pending requests: each leaves req, its place (its host's queue, or delayed) and every
-- count (the host's p, meta's pending and delayed), and is counted in meta's dropped; its host is
-- placed again. Its fingerprint stays seen. Leased and failed requests are never touched.

-- Counts and placement after ``n`` requests were dropped: ``of`` host -> how many, ``delayed`` of them
-- from DELAYED, ``touched`` the hosts whose queues lost some.
local function dropped(n, of, delayed, touched, cs)
  if n == 0 then return end
  for host, k in pairs(of) do call('HINCRBY', P .. 'h:' .. host, 'p', -k) end
  call('HINCRBY', META, 'pending', -n)
  call('HINCRBY', META, 'dropped', n)
  if delayed > 0 then
    call('HINCRBY', META, 'delayed', -delayed)
    delayed_now = delayed_now - delayed
  end
  place_all(touched, cs.now, cs)
end
