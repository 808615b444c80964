--[[ Claim the topics whose scheduler time has come, for one tick: read up to limit of them
  and set each one's score to the claim score, beyond any real time, until the tick writes
  back its next due time (due_set.lua, compared with the claim score). A request that
  lowers a claimed topic's due time meanwhile (ZADD LT: any real time is below the claim)
  makes that write-back keep the lower time instead of the visit's answer, computed before
  the request; and no other tick visits a claimed topic. A tick that dies before its
  write-back leaves its topics claimed until the repair sweep lowers them.
  KEYS[1] due      zset  topic -> next scheduler time (ms)
  ARGV[1] now_ms  ARGV[2] limit  ARGV[3] claim score (ms)
  Returns: {topics, head}
    topics  the claimed topics, earliest due first ({} when none is due)
    head    when none is due: the earliest unclaimed due time, -1 when there is none (with
            topics claimed -1: the tick reads the head again after its write-back)
  Memory: replaces scores, so its first write is ZREM (not deny-oom): the scheduler keeps
  running over maxmemory and a full Redis drains. ]]
local due = KEYS[1]
local now, limit, claim = ARGV[1], ARGV[2], ARGV[3]

-- The head first: an idle tick costs one O(log n) read, whatever the index holds.
local first = redis.call('ZRANGE', due, 0, 0, 'WITHSCORES')
local head = first[2] and tonumber(first[2])
if head == nil or head >= tonumber(claim) then return {{}, -1} end
if head > tonumber(now) then return {{}, head} end

local topics = redis.call('ZRANGEBYSCORE', due, '-inf', now, 'LIMIT', 0, limit)
redis.call('ZREM', due, unpack(topics))
local claimed = {}   -- the claim as ARGV gave it: Lua would print 2^53 - 1 rounded
for i, topic in ipairs(topics) do
  claimed[2 * i - 1] = claim
  claimed[2 * i] = topic
end
redis.call('ZADD', due, unpack(claimed))
return {topics, -1}
