-- clients: the clients of a crawl and their last sightings.
-- uses: common
--
-- The clients of a crawl: the hash ``clients``, client id -> JSON {host, pid, lease, beat, started, seen}
-- (started and seen: the server's clock; beat: how often its renewal says it is there, null without one).
-- A client is live while now - seen < 2 beats (without beats: its lease).

local CLIENTS = P .. 'clients'
local FORGOTTEN_AFTER = 10  -- leases: a client unseen this long is gone (its leases ran out long ago)

-- Record ``client`` (its JSON ``info``: host, pid, lease) as seen now, keeping when it started.
local function beat(client, info, now)
  local ok, entry = pcall(cjson.decode, info)
  if not ok or type(entry) ~= 'table' then error({err = 'ERR client info is not a JSON object'}) end
  local started = now
  local old = call('HGET', CLIENTS, client)
  if old then
    local fine, was = pcall(cjson.decode, old)
    if fine and type(was) == 'table' and tonumber(was.started) then started = tonumber(was.started) end
  end
  entry.started, entry.seen = started, now
  call('HSET', CLIENTS, client, cjson.encode(entry))
end

-- Remove the entries of clients unseen for longer than FORGOTTEN_AFTER of their leases: until then a
-- killed client is listed as dead, then it goes; entries that cannot be read go too (they are only ever
-- written here).
local function forget_dead(now)
  local all = call('HGETALL', CLIENTS)
  for k = 1, #all, 2 do
    local ok, entry = pcall(cjson.decode, all[k + 1])
    local seen = ok and type(entry) == 'table' and tonumber(entry.seen)
    local lease = ok and type(entry) == 'table' and tonumber(entry.lease) or 0
    if not seen or now - seen > FORGOTTEN_AFTER * lease then call('HDEL', CLIENTS, all[k]) end
  end
end
