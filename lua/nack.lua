--[[ Negative ack: give a delivery back. consuming (3) -> ready (2) at the tail of the queue,
  or -> waiting (1) until now + delay, or -> retry exhausted (6) when its deliveries are used
  up or the redelivery would come at or after its expireTime.
  KEYS: the 19 keys (includes/keys.lua).
  ARGV[1] msg_id  ARGV[2] now_ms  ARGV[3] end_life_ms
  ARGV[4] receipt ('' = none)  ARGV[5] delay_ms (-1: the topic's redelivery backoff)
  ARGV[6] hint channel  ARGV[7] topic  ARGV[8..18] the server's default settings
  Returns: {outcome, fields, lowered_due, dead}
    outcome  OK: the status in fields says where it went (1, 2 or 6);
             NO_MESSAGE no such message, or it has ended (404);
             NOT_CONSUMING waiting or ready: nothing changes (400);
             STALE_RECEIPT the receipt is not the latest delivery's (409)
    dead     1 when it became a dead letter
  Memory: drains (first write ZREM): runs over maxmemory.
  A grouped message stays its group's head (the group waits behind it, with its backoff)
  until it ends; ended (6), it releases its group.
  Publishes "<k> <topic>" when the message is ready again or its group's next one became
  ready. Any other status changes nothing
  (camellia pushes the id back regardless; we never queue an id that is not consuming). ]]
--@include dead_letter
local msg_id, now = ARGV[1], tonumber(ARGV[2])
local end_life, receipt, delay = tonumber(ARGV[3]), ARGV[4], tonumber(ARGV[5])
local channel, topic = ARGV[6], ARGV[7]

local m = find_message(tk.msgs, msg_id)
local refused = refuse_delivery_change(m, receipt)
if refused then return {refused, m and shown_status(m, now) or {}, -1, 0} end

local s = topic_settings(tk.config, tk.topic_config)
if delay < 0 then delay = backoff(s, tonumber(m[DELIVERIES])) end
local _, dead_lettered = redeliver(m, now, delay, end_life, s)
publish_advanced(channel, topic, now)
return {OK, m, due_lowered(), dead_lettered}
