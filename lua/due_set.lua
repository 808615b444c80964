--[[ Record a topic's next scheduler time in the namespace due index, after a tick.
  Compare-and-set: if the index still holds the tick's claim (due_claim.lua), the tick's
  answer replaces it (or removes the topic when it holds nothing live); if a request lowered
  it meanwhile (a send, a pull's ack deadline, a nack's backoff), keep the lower of the two.
  Bookkeeping only: never the truth about a message.
  KEYS[1] due      zset  topic -> next scheduler time (ms)
  ARGV[1] topic  ARGV[2] the claim score (ms)  ARGV[3] next time (ms), -1 = nothing live
  Returns: OK replaced; KEPT a lower concurrent score stays
  Memory: replaces a score, so its first write is ZREM (not deny-oom): the scheduler keeps
  running over maxmemory and a full Redis drains. ]]
--@include outcome
local due = KEYS[1]
local topic, seen, next_time = ARGV[1], ARGV[2], tonumber(ARGV[3])

local current = redis.call('ZSCORE', due, topic)
if current == false or tonumber(current) == tonumber(seen) then
  redis.call('ZREM', due, topic)
  if next_time >= 0 then
    redis.call('ZADD', due, next_time, topic)
  end
  return OK
end
if next_time >= 0 and next_time < tonumber(current) then
  redis.call('ZREM', due, topic)
  redis.call('ZADD', due, next_time, topic)
end
return KEPT
