-- LEAVE: remove a client's entry (a close).
--
-- ARGV: client id. Removes the client's entry (a client that closes); a crawl that is gone stays gone.

local P = string.sub(KEYS[1], 1, -5)
return redis.call('HDEL', P .. 'clients', ARGV[1])
