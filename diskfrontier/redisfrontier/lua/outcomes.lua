-- OUTCOMES: add what fetches came to to the crawl's outcome counters (record_outcome).
-- uses: common
--
-- ARGV: pairs of a meta field and what to add to it (a whole number; fetch_seconds_sum, a real one).
-- Refused, as every step, when the crawl is gone. Returns 1.

crawl_settings()
for at = 1, #ARGV, 2 do
  if ARGV[at] == 'fetch_seconds_sum' then
    call('HINCRBYFLOAT', META, ARGV[at], ARGV[at + 1])
  else
    call('HINCRBY', META, ARGV[at], ARGV[at + 1])
  end
end
return 1
