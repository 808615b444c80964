--[[ Redrive dead letters: retry exhausted (6) -> ready (2) at the tail of the queue, with
  retry 0, triggerTime now and a fresh expireTime (now + the topic's ttl).
  KEYS[1] waiting  KEYS[2] ready  KEYS[3] ack  KEYS[4] expire  KEYS[5] dead  (zsets)
  KEYS[6] config   hash  the topic's settings (read only)
  ARGV[1] msg_prefix  ARGV[2] now_ms  ARGV[3] msg_id ('' = the oldest `limit`)
  ARGV[4] limit (<= 1000)  ARGV[5] hint channel  ARGV[6] topic
  ARGV[7..15] the server's default settings
  Returns: {outcome, count, lowered_due}; outcome NO_MESSAGE when msg_id is not a dead letter.
  Memory: first write ZREM dead: runs over maxmemory (it moves, never adds, a message).
  Publishes "<count> <topic>" when it redrove any. ]]
--@include settings
--@include message
local waiting, ready, ack, expire, dead, config =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local msg_prefix, now, msg_id = ARGV[1], tonumber(ARGV[2]), ARGV[3]
local limit, channel, topic = tonumber(ARGV[4]), ARGV[5], ARGV[6]

local ids
if msg_id ~= '' then
  if not redis.call('ZSCORE', dead, msg_id) then return {NO_MESSAGE, 0, -1} end
  ids = {msg_id}
else
  ids = redis.call('ZRANGE', dead, 0, limit - 1)
end
local s = topic_settings(config)
local before = due_at(waiting, ack, expire)
local count = 0
for _, id in ipairs(ids) do
  redis.call('ZREM', dead, id)
  local key = msg_prefix .. id
  if redis.call('HGET', key, 's') == '6' then
    local expire_at = now + s.ttlMillis
    redis.call('PERSIST', key)
    redis.call('HSET', key, 's', 2, 'n', 0, 't', now, 'e', expire_at)
    redis.call('HDEL', key, 'c')
    redis.call('ZADD', ready, now, id)
    redis.call('ZADD', expire, expire_at, id)
    count = count + 1
  end
end
if count > 0 then
  redis.call('PUBLISH', channel, count .. ' ' .. topic)
end
if msg_id ~= '' and count == 0 then return {NO_MESSAGE, 0, -1} end
return {OK, count, lowered_due(before, waiting, ack, expire)}
