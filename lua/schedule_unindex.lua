--[[ Take a schedule out of the namespace's schedule index, only if its score is still the one
  the loop read (compare-and-set): a create that indexed it again meanwhile keeps its entry.
  KEYS[1] schedule-index  zset "<topic>\n<scheduleId>" -> when the loop must look at it
  ARGV[1] member  ARGV[2] the score the loop read
  Returns: OK removed; KEPT the score changed meanwhile (or it was gone)
  Memory: shrinks (first write ZREM). ]]
--@include outcome
local index = KEYS[1]
local member, seen = ARGV[1], ARGV[2]

local current = redis.call('ZSCORE', index, member)
if current == false or tonumber(current) ~= tonumber(seen) then return KEPT end
redis.call('ZREM', index, member)
return OK
