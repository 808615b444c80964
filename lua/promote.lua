--[[ Move due messages from waiting (1) to ready (2).
  KEYS[1] waiting  zset  slot -> triggerTime
  KEYS[2] ready    zset  slot -> when it became ready
  KEYS[3] ack      zset  (read only, for the due time)
  KEYS[4] expire   zset  slot -> expireTime; promoted messages enter it
  KEYS[5] dead     KEYS[6] config  (unused; every topic script takes the same keys)
  KEYS[7] msgs     hash  slot -> record   KEYS[8] ended  zset  (read only, for the due time)
  ARGV[1] now_ms  ARGV[2] limit (<= 1000)  ARGV[3] hint channel  ARGV[4] topic
  Returns: {moved, gaps, due}; the caller repeats while moved equals limit.
    due  the topic's next due time, -1 when it holds nothing (live or retained).
  Memory: drains (first write ZREM): runs over maxmemory, so due messages still reach consumers.
  Publishes "<moved> <topic>" when it moved anything. ]]
--@include promote
local waiting, ready, ack, expire, msgs, ended =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[7], KEYS[8]
local now, limit = tonumber(ARGV[1]), tonumber(ARGV[2])
local channel, topic = ARGV[3], ARGV[4]

local moved, gaps = promote(waiting, ready, expire, msgs, now, limit)
if moved > 0 then
  redis.call('PUBLISH', channel, moved .. ' ' .. topic)
end
return {moved, gaps, due_at(waiting, ack, expire, ended) or -1}
