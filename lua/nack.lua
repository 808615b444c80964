--[[ Negative ack: give a delivery back. consuming (3) -> ready (2) at the tail of the queue,
  or -> waiting (1) until now + delay, or -> retry exhausted (6) when its deliveries are used
  up or the redelivery would come at or after its expireTime.
  KEYS[1] waiting  KEYS[2] ready  KEYS[3] ack  KEYS[4] expire  KEYS[5] dead  (zsets)
  KEYS[6] config   hash  the topic's settings (read only)
  KEYS[7] msg      hash  the message
  ARGV[1] msg_id  ARGV[2] msg_prefix  ARGV[3] now_ms  ARGV[4] end_life_ms
  ARGV[5] receipt ('' = none)  ARGV[6] delay_ms (-1: the topic's redelivery backoff)
  ARGV[7] hint channel  ARGV[8] topic  ARGV[9..17] the server's default settings
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
local waiting, ready, ack, expire, dead, config, msg =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7]
local msg_id, msg_prefix, now = ARGV[1], ARGV[2], tonumber(ARGV[3])
local end_life, receipt, delay = tonumber(ARGV[4]), ARGV[5], tonumber(ARGV[6])
local channel, topic = ARGV[7], ARGV[8]

local m = read_message(msg)
local refused = refuse_delivery_change(m, receipt)
if refused then return {refused, m or {}, -1, 0} end

local s = topic_settings(config)
if delay < 0 then delay = backoff(s, tonumber(m[6])) end
local before = due_at(waiting, ack, expire)
redis.call('ZREM', ack, msg_id)
local new_status, dead_lettered = redeliver(msg, msg_id, m, {waiting, ready, ack, expire, dead},
  msg_prefix, now, delay, end_life, s)
if new_status == 2 then
  redis.call('PUBLISH', channel, '1 ' .. topic)
end
return {OK, m, lowered_due(before, waiting, ack, expire), dead_lettered}
