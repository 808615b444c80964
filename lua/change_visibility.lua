--[[ Change a delivery's ack deadline: consuming (3) stays consuming until now + timeout (a
  long handler's heartbeat); timeout 0 gives it up at once: ready (2) at the tail of the
  queue with no backoff, or retry exhausted (6) when its deliveries or life are used up.
  KEYS: the 19 keys (includes/keys.lua).
  ARGV[1] msg_id  ARGV[2] now_ms  ARGV[3] timeout_ms (>= 0)
  ARGV[4] receipt ('' = none)  ARGV[5] end_life_ms  ARGV[6] hint channel  ARGV[7] topic
  ARGV[8..18] the server's default settings
  Returns: {outcome, fields, lowered_due, dead}
    outcome  OK (fields as after the change); NO_MESSAGE unknown or ended (404);
             NOT_CONSUMING waiting or ready (400); STALE_RECEIPT (409)
  Memory: first write ZREM (a new deadline replaces the old one): runs over maxmemory, so a
  long handler's heartbeat keeps working while a full Redis drains. ]]
--@include dead_letter
local msg_id, now = ARGV[1], tonumber(ARGV[2])
local timeout, receipt, end_life = tonumber(ARGV[3]), ARGV[4], tonumber(ARGV[5])
local channel, topic = ARGV[6], ARGV[7]

local m = find_message(tk.msgs, msg_id)
local refused = refuse_delivery_change(m, receipt)
if refused then return {refused, m and shown_status(m, now) or {}, -1, 0} end

redis.call('ZREM', tk.ack, m.slot)   -- first (see Memory above)
if timeout > 0 then
  zadd_due(tk.ack, now + timeout, m.slot)
  return {OK, m, due_lowered(), 0}
end
local s = topic_settings(tk.config, tk.topic_config)
local _, dead_lettered = redeliver(m, now, 0, end_life, s)
publish_advanced(channel, topic, now)
return {OK, m, due_lowered(), dead_lettered}
