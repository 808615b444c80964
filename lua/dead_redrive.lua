--[[ Redrive dead letters: retry exhausted (6) -> ready (2) at the tail of the queue, with
  retry 0, triggerTime now and a fresh expireTime (now + the topic's ttl).
  KEYS[1] waiting  KEYS[2] ready  KEYS[3] ack  KEYS[4] expire  KEYS[5] dead  (zsets)
  KEYS[6] config   hash  the topic's settings (read only)
  KEYS[7] msgs     hash  slot -> record   KEYS[8] ended  zset  a redriven message leaves it
  ARGV[1] now_ms  ARGV[2] msg_id ('' = the oldest `limit`)
  ARGV[3] limit (<= 1000)  ARGV[4] hint channel  ARGV[5] topic
  ARGV[6..14] the server's default settings
  A dead letter past its retention (not yet purged) is removed, not redriven.
  Returns: {outcome, count, lowered_due}; outcome NO_MESSAGE when msg_id is not a dead letter.
  Memory: first write ZREM dead: runs over maxmemory (it moves, never adds, a message).
  Publishes "<count> <topic>" when it redrove any. ]]
--@include settings
--@include message
local waiting, ready, ack, expire, dead, config, msgs, ended =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8]
local now, msg_id = tonumber(ARGV[1]), ARGV[2]
local limit, channel, topic = tonumber(ARGV[3]), ARGV[4], ARGV[5]

local slots
if msg_id ~= '' then
  local m = find_message(msgs, msg_id)
  if not m or not redis.call('ZSCORE', dead, m.slot) then return {NO_MESSAGE, 0, -1} end
  slots = {m.slot}
else
  slots = redis.call('ZRANGE', dead, 0, limit - 1)
end
local s = topic_settings(config)
local before = due_at(waiting, ack, expire, ended)
local count = 0
for _, slot in ipairs(slots) do
  redis.call('ZREM', dead, slot)
  local m = load_slot(msgs, slot)
  local dead_letter = m and tonumber(m[STATUS]) == Status.RETRY_EXHAUSTED
  if dead_letter and not retained(m, ended, now) then
    drop_message(msgs, ended, dead, slot)      -- past its retention: gone, not redriven
  elseif dead_letter then
    local expire_at = now + s.ttlMillis
    redis.call('ZREM', ended, slot)
    m[TRIGGER_TIME], m[EXPIRE_TIME], m[DELIVERIES], m[STATUS] = now, expire_at, 0, Status.READY
    m.dt = nil
    save_message(msgs, m)
    redis.call('ZADD', ready, now, slot)
    redis.call('ZADD', expire, expire_at, slot)
    count = count + 1
  end
end
if count > 0 then
  redis.call('PUBLISH', channel, count .. ' ' .. topic)
end
if msg_id ~= '' and count == 0 then return {NO_MESSAGE, 0, -1} end
return {OK, count, lowered_due(before, waiting, ack, expire, ended)}
