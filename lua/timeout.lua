--[[ Ack timeouts: consuming (3) past its deadline -> ready (2) for redelivery, or -> retry
  exhausted (6) when its deliveries are used up or it is past its expireTime.
  KEYS[1] waiting  zset  (read only, for the due time)
  KEYS[2] ready    zset  msgId -> triggerTime
  KEYS[3] ack      zset  msgId -> ack deadline
  KEYS[4] expire   zset  msgId -> expireTime
  ARGV[1] msg_prefix (same hash tag)  ARGV[2] now_ms  ARGV[3] limit (<= 1000)
  ARGV[4] end_life_ms  ARGV[5] hint channel  ARGV[6] topic
  Returns: {requeued, ended, due}; the caller repeats while requeued + ended equals limit.
    due  the topic's next due time, -1 when it holds nothing live.
  Memory: drains (first write ZREM): runs over maxmemory.
  Publishes "<requeued> <topic>" when it requeued anything. ]]
--@include message
local waiting, ready, ack, expire = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local msg_prefix, now, limit = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local end_life, channel, topic = tonumber(ARGV[4]), ARGV[5], ARGV[6]

local late = redis.call('ZRANGEBYSCORE', ack, '-inf', now, 'LIMIT', 0, limit)
local requeued, ended = 0, 0
for _, id in ipairs(late) do
  if redis.call('ZREM', ack, id) == 1 then
    local key = msg_prefix .. id
    local m = read_message(key)
    if m and tonumber(m[7]) == 3 then
      if tonumber(m[6]) >= tonumber(m[5]) + 1 or now >= tonumber(m[4]) then
        redis.call('ZREM', expire, id)
        end_message(key, 6, end_life)
        ended = ended + 1
      else
        redis.call('ZADD', ready, m[3], id)
        redis.call('HSET', key, 's', 2)
        requeued = requeued + 1
      end
    end
  end
end
if requeued > 0 then
  redis.call('PUBLISH', channel, requeued .. ' ' .. topic)
end
return {requeued, ended, due_at(waiting, ack, expire) or -1}
