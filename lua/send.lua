--[[ Accept messages, each on its own: -> waiting (1), or -> ready (2) when already due.
  One call takes one message or many (sendMsg is a batch of one, sendMsgBatch sends its
  entries in calls of up to 100): the keys, the time and the settings are passed once.
  KEYS[1] waiting  zset  slot -> triggerTime
  KEYS[2] ready    zset  slot -> when it became ready (triggerTime for a send)
  KEYS[3] ack      zset  (read only, for the due time)
  KEYS[4] expire   zset  slot -> expireTime, only when ready at once (waiting messages
                         enter the expiry index when promoted: they cannot expire before)
  KEYS[5] dead     zset  a dead letter with this id is replaced: it leaves the dead queue
  KEYS[6] config   hash  the topic's settings (read only)
  KEYS[7] msgs     hash  slot -> record (includes/message.lua)
  KEYS[8] ended    zset  slot -> end of retention; a replaced ended message leaves it
  ARGV[1] now_ms  ARGV[2] hint channel  ARGV[3] topic  ARGV[4] n, the number of messages
  then n times 6 ARGV, one message each:
    msg_id, body, trigger_ms (>= now_ms), ttl_ms (-1: the topic's),
    max_retry (-1: the topic's), attributes (JSON text, '' = none)
  then the server's 9 default settings (includes/settings.lua)
  Returns one reply per message, in order: {outcome, fields, lowered_due}
    outcome      OK accepted; DUPLICATE a live message (1..3) has this id: nothing written,
                 its stored fields returned. An ended (4..7) one is replaced. A message of
                 the same call counts: the second of two equal msgIds is a DUPLICATE.
    fields       {m, p, t, e, r, n, s, a, c} of the message now stored
    lowered_due  the topic's new due time if this message brought it forward, else -1
  or, for a message whose own writes failed (a Lua error: a bug), that error reply in its
  place; the other messages stand, as if each had been its own call.
  Memory: grows Redis (one record, one zset entry per message), so the first write is HSET,
  a deny-oom command: over maxmemory Redis refuses the whole call (OOM) before anything is
  written, and once a call has written it is not stopped halfway. Keep it first.
  Publishes "<k> <topic>" on the hint channel once, when k > 0 messages are ready at once
  (held long polls wake k waiters). ]]
--@include settings
--@include message
local waiting, ready, ack, expire, dead, config, msgs, ended =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8]
local now, channel, topic, n = tonumber(ARGV[1]), ARGV[2], ARGV[3], tonumber(ARGV[4])

local s = topic_settings(config)
-- The due time before each message: read once, then lowered by the messages accepted.
local due = due_at(waiting, ack, expire, ended)
local readied = 0

local function send_one(at)
  local msg_id, body = ARGV[at], ARGV[at + 1]
  local trigger, ttl, max_retry = tonumber(ARGV[at + 2]), tonumber(ARGV[at + 3]),
    tonumber(ARGV[at + 4])
  local attributes = ARGV[at + 5]
  local existing, slot = find_message(msgs, msg_id)
  if existing and is_live(existing[STATUS]) then
    return {DUPLICATE, existing, -1}
  end
  if ttl < 0 then ttl = s.ttlMillis end
  if max_retry < 0 then max_retry = s.maxRetry end
  local due_now = trigger <= now
  local expire_at = trigger + ttl
  -- A whole new record, so an ended message with this id is wholly replaced (same slot).
  local m = {id = msg_id, slot = slot}
  m[BODY], m[ATTRIBUTES] = body, attributes ~= '' and attributes or false
  m[PRODUCE_TIME], m[TRIGGER_TIME], m[EXPIRE_TIME] = now, trigger, expire_at
  m[MAX_RETRY], m[DELIVERIES] = max_retry, 0
  m[STATUS] = due_now and Status.READY or Status.WAITING
  m[RECEIPT] = false
  save_message(msgs, m)
  if existing then
    redis.call('ZREM', ended, m.slot)
    redis.call('ZREM', dead, m.slot)
  end
  redis.call('ZADD', due_now and ready or waiting, trigger, m.slot)
  if due_now then
    redis.call('ZADD', expire, expire_at, m.slot)
    readied = readied + 1
  end
  -- A send only adds one entry that counts for the due time (waiting: its trigger; ready: its
  -- expiry), so the due time after it is the lower of that and the one before.
  local entry = due_now and expire_at or trigger
  if due and entry >= due then return {OK, m, -1} end
  due = entry
  return {OK, m, entry}
end

local replies = each_on_its_own(n, function(i) return send_one(5 + (i - 1) * 6) end)
if readied > 0 then redis.call('PUBLISH', channel, readied .. ' ' .. topic) end
return replies
