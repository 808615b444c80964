--[[ Forget an inactive topic: drop it from the registry and the due index, but only if
  nobody used it since the recycler read its last-active time (compare-and-set), and only
  after the caller saw all its queues empty. camellia's rule, without its inverted comparison.
  KEYS[1] topics   zset  topic -> last active (ms)
  KEYS[2] due      zset  topic -> next scheduler time (ms)
  ARGV[1] topic  ARGV[2] last-active score the recycler read
  Returns: OK recycled; KEPT used meanwhile
  Memory: shrinks (first write ZREM). ]]
--@include outcome
local topics, due = KEYS[1], KEYS[2]
local topic, seen = ARGV[1], ARGV[2]

local current = redis.call('ZSCORE', topics, topic)
if current == false or tonumber(current) ~= tonumber(seen) then return KEPT end
redis.call('ZREM', topics, topic)
redis.call('ZREM', due, topic)
return OK
