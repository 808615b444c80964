--[[ Change a delivery's ack deadline: consuming (3) stays consuming until now + timeout (a
  long handler's heartbeat); timeout 0 gives it up at once: ready (2) at the tail of the
  queue with no backoff, or retry exhausted (6) when its deliveries or life are used up.
  KEYS[1] waiting  KEYS[2] ready  KEYS[3] ack  KEYS[4] expire  KEYS[5] dead  (zsets)
  KEYS[6] config   hash  the topic's settings (read only)
  KEYS[7] msgs     hash  slot -> record   KEYS[8] ended  zset  slot -> end of retention
  ARGV[1] msg_id  ARGV[2] now_ms  ARGV[3] timeout_ms (>= 0)
  ARGV[4] receipt ('' = none)  ARGV[5] end_life_ms  ARGV[6] hint channel  ARGV[7] topic
  ARGV[8..16] the server's default settings
  Returns: {outcome, fields, lowered_due, dead}
    outcome  OK (fields as after the change); NO_MESSAGE unknown or ended (404);
             NOT_CONSUMING waiting or ready (400); STALE_RECEIPT (409)
  Memory: first write ZREM (a new deadline replaces the old one): runs over maxmemory, so a
  long handler's heartbeat keeps working while a full Redis drains. ]]
--@include dead_letter
local waiting, ready, ack, expire, dead, config, msgs, ended =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8]
local msg_id, now = ARGV[1], tonumber(ARGV[2])
local timeout, receipt, end_life = tonumber(ARGV[3]), ARGV[4], tonumber(ARGV[5])
local channel, topic = ARGV[6], ARGV[7]
local tk = {waiting = waiting, ready = ready, ack = ack, expire = expire, dead = dead,
  config = config, msgs = msgs, ended = ended}   -- by name, for includes/dead_letter.lua

local m = find_message(msgs, msg_id)
local refused = refuse_delivery_change(m, receipt)
if refused then return {refused, m or {}, -1, 0} end

local before = due_at(waiting, ack, expire, ended)
redis.call('ZREM', ack, m.slot)
if timeout > 0 then
  redis.call('ZADD', ack, now + timeout, m.slot)
  return {OK, m, lowered_due(before, waiting, ack, expire, ended), 0}
end
local s = topic_settings(config)
local new_status, dead_lettered = redeliver(tk, m, now, 0, end_life, s)
if new_status == Status.READY then
  redis.call('PUBLISH', channel, '1 ' .. topic)
end
return {OK, m, lowered_due(before, waiting, ack, expire, ended), dead_lettered}
