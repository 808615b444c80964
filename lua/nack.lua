--[[ Negative ack: consuming (3) -> ready (2) at once, or -> retry exhausted (6) when the
  message has used all maxRetry + 1 deliveries or is past its expireTime.
  KEYS[1] waiting  zset  (unused; every topic script takes the same keys)
  KEYS[2] ready    zset  msgId -> triggerTime
  KEYS[3] ack      zset
  KEYS[4] expire   zset
  KEYS[5] msg      hash  the message
  ARGV[1] msg_id  ARGV[2] now_ms  ARGV[3] end_life_ms  ARGV[4] hint channel  ARGV[5] topic
  Returns: {outcome, fields}
    outcome  OK: the status in fields says where it went (2 ready again, 6 ended);
             NO_MESSAGE no such message, or it has ended (404);
             NOT_CONSUMING waiting or ready: nothing changes (400)
  Memory: drains (first write ZREM): runs over maxmemory.
  Publishes "1 <topic>" when the message is ready again. Any other status changes nothing
  (camellia pushes the id back regardless; we never queue an id that is not consuming). ]]
--@include message
local ready, ack, expire, msg = KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local msg_id, now, end_life = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local channel, topic = ARGV[4], ARGV[5]

local m = read_message(msg)
if not m then return {NO_MESSAGE, {}} end
local status = tonumber(m[7])
if status == 1 or status == 2 then return {NOT_CONSUMING, m} end
if status ~= 3 then return {NO_MESSAGE, m} end

redis.call('ZREM', ack, msg_id)
if tonumber(m[6]) >= tonumber(m[5]) + 1 or now >= tonumber(m[4]) then
  redis.call('ZREM', expire, msg_id)
  end_message(msg, 6, end_life)
  m[7] = '6'
  return {OK, m}
end
redis.call('ZADD', ready, m[3], msg_id)
redis.call('HSET', msg, 's', 2)
redis.call('PUBLISH', channel, '1 ' .. topic)
m[7] = '2'
return {OK, m}
