-- SET_PAUSE: pause or resume the crawl (pause, resume).
-- uses: common
--
-- ARGV: '1' pause, '0' resume. A pause is the meta field paused (the time it began, the server's
-- clock); pausing a paused crawl keeps its time. Returns that time ('' once resumed).

local cs = crawl_settings()
if ARGV[1] ~= '1' then
  call('HDEL', META, 'paused')
  return ''
end
if not cs.paused then call('HSET', META, 'paused', string.format('%.6f', cs.now)) end
return call('HGET', META, 'paused')
