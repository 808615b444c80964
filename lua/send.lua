--[[ Accept a message: -> waiting (1), or -> ready (2) when already due.
  KEYS[1] waiting  zset  slot -> triggerTime
  KEYS[2] ready    zset  slot -> when it became ready (triggerTime for a send)
  KEYS[3] ack      zset  (read only, for the due time)
  KEYS[4] expire   zset  slot -> expireTime, only when ready at once (waiting messages
                         enter the expiry index when promoted: they cannot expire before)
  KEYS[5] dead     zset  a dead letter with this id is replaced: it leaves the dead queue
  KEYS[6] config   hash  the topic's settings (read only)
  KEYS[7] msgs     hash  slot -> record (includes/message.lua)
  KEYS[8] ended    zset  slot -> end of retention; a replaced ended message leaves it
  ARGV[1] msg_id  ARGV[2] body  ARGV[3] now_ms  ARGV[4] trigger_ms (>= now_ms)
  ARGV[5] ttl_ms (-1: the topic's)  ARGV[6] max_retry (-1: the topic's)
  ARGV[7] attributes (JSON text, '' = none)  ARGV[8] hint channel  ARGV[9] topic
  ARGV[10..18] the server's default settings (includes/settings.lua)
  Returns: {outcome, fields, lowered_due}
    outcome      OK accepted; DUPLICATE a live message (1..3) has this id: nothing written,
                 its stored fields returned. An ended (4..7) one is replaced.
    fields       {m, p, t, e, r, n, s, a, c} of the message now stored
    lowered_due  the topic's new due time if this send brought it forward, else -1
  Memory: grows Redis (one record, one zset entry), so its first write is HSET, a deny-oom
  command: over maxmemory Redis refuses the whole script (OOM) before anything is written.
  Keep it first.
  Publishes "1 <topic>" on the hint channel when the message is ready at once. ]]
--@include settings
--@include message
local waiting, ready, ack, expire, dead, config, msgs, ended =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8]
local msg_id, body = ARGV[1], ARGV[2]
local now, trigger = tonumber(ARGV[3]), tonumber(ARGV[4])
local ttl, max_retry = tonumber(ARGV[5]), tonumber(ARGV[6])
local attributes, channel, topic = ARGV[7], ARGV[8], ARGV[9]

local existing, slot = find_message(msgs, msg_id)
if existing and tonumber(existing[7]) <= 3 then
  return {DUPLICATE, existing, -1}
end

local s = topic_settings(config)
if ttl < 0 then ttl = s.ttlMillis end
if max_retry < 0 then max_retry = s.maxRetry end
local before = due_at(waiting, ack, expire, ended)
local due_now = trigger <= now
local status = due_now and 2 or 1
local expire_at = trigger + ttl
-- A whole new record, so an ended message with this id is wholly replaced (same slot).
local m = {body, now, trigger, expire_at, max_retry, 0, status,
  attributes ~= '' and attributes or false, false}
m.id = msg_id
m.slot = slot
save_message(msgs, m)
if existing then
  redis.call('ZREM', ended, m.slot)
  redis.call('ZREM', dead, m.slot)
end
redis.call('ZADD', due_now and ready or waiting, trigger, m.slot)
if due_now then
  redis.call('ZADD', expire, expire_at, m.slot)
  redis.call('PUBLISH', channel, '1 ' .. topic)
end
-- A send only adds one entry that counts for the due time (waiting: its trigger; ready: its
-- expiry), so the due time after it is the lower of that and the one before.
local entry = due_now and expire_at or trigger
return {OK, m, (not before or entry < before) and entry or -1}
