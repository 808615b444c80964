--[[ Negative ack: give a delivery back. consuming (3) -> ready (2) at the tail of the queue,
  or -> waiting (1) until now + delay, or -> retry exhausted (6) when its deliveries are used
  up or the redelivery would come at or after its expireTime.
  KEYS[1] waiting  KEYS[2] ready  KEYS[3] ack  KEYS[4] expire  KEYS[5] dead  (zsets)
  KEYS[6] config   hash  the topic's settings (read only)
  KEYS[7] msgs     hash  slot -> record   KEYS[8] ended  zset  slot -> end of retention
  ARGV[1] msg_id  ARGV[2] now_ms  ARGV[3] end_life_ms
  ARGV[4] receipt ('' = none)  ARGV[5] delay_ms (-1: the topic's redelivery backoff)
  ARGV[6] hint channel  ARGV[7] topic  ARGV[8..16] the server's default settings
  Returns: {outcome, fields, lowered_due, dead}
    outcome  OK: the status in fields says where it went (1, 2 or 6);
             NO_MESSAGE no such message, or it has ended (404);
             NOT_CONSUMING waiting or ready: nothing changes (400);
             STALE_RECEIPT the receipt is not the latest delivery's (409)
    dead     1 when it became a dead letter
  Memory: drains (first write ZREM): runs over maxmemory.
  Publishes "1 <topic>" when the message is ready again. Any other status changes nothing
  (camellia pushes the id back regardless; we never queue an id that is not consuming). ]]
--@include dead_letter
local waiting, ready, ack, expire, dead, config, msgs, ended =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8]
local msg_id, now = ARGV[1], tonumber(ARGV[2])
local end_life, receipt, delay = tonumber(ARGV[3]), ARGV[4], tonumber(ARGV[5])
local channel, topic = ARGV[6], ARGV[7]
local tk = {waiting = waiting, ready = ready, ack = ack, expire = expire, dead = dead,
  config = config, msgs = msgs, ended = ended}   -- by name, for includes/dead_letter.lua

local m = find_message(msgs, msg_id)
local refused = refuse_delivery_change(m, receipt)
if refused then return {refused, m or {}, -1, 0} end

local s = topic_settings(config)
if delay < 0 then delay = backoff(s, tonumber(m[DELIVERIES])) end
local before = due_at(waiting, ack, expire, ended)
redis.call('ZREM', ack, m.slot)
local new_status, dead_lettered = redeliver(tk, m, now, delay, end_life, s)
if new_status == Status.READY then
  redis.call('PUBLISH', channel, '1 ' .. topic)
end
return {OK, m, lowered_due(before, waiting, ack, expire, ended), dead_lettered}
