--[[ Move due messages from waiting (1) to ready (2).
  KEYS[1] waiting  zset  msgId -> triggerTime
  KEYS[2] ready    zset  msgId -> when it became ready
  KEYS[3] ack      zset  (read only, for the due time)
  KEYS[4] expire   zset  msgId -> expireTime; promoted messages enter it
  KEYS[5] dead     KEYS[6] config  (unused; every topic script takes the same keys)
  ARGV[1] msg_prefix (same hash tag)  ARGV[2] now_ms  ARGV[3] limit (<= 1000)
  ARGV[4] hint channel  ARGV[5] topic
  Returns: {moved, gaps, due}; the caller repeats while moved equals limit.
    due  the topic's next due time, -1 when it holds nothing live.
  Memory: drains (first write ZREM): runs over maxmemory, so due messages still reach consumers.
  Publishes "<moved> <topic>" when it moved anything. ]]
--@include promote
local waiting, ready, ack, expire = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local msg_prefix, now, limit = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local channel, topic = ARGV[4], ARGV[5]

local moved, gaps = promote(waiting, ready, expire, msg_prefix, now, limit)
if moved > 0 then
  redis.call('PUBLISH', channel, moved .. ' ' .. topic)
end
return {moved, gaps, due_at(waiting, ack, expire) or -1}
