--[[ Redrive dead letters: retry exhausted (6) -> ready (2) at the tail of the queue, with
  retry 0, triggerTime now and a fresh expireTime (now + the topic's ttl).
  KEYS: the 19 keys (includes/keys.lua); config is read only.
  ARGV[1] now_ms  ARGV[2] msg_id ('' = the oldest `limit`)
  ARGV[3] limit (<= 1000)  ARGV[4] hint channel  ARGV[5] topic
  ARGV[6..] the server's default settings
  A dead letter past its retention (not yet purged) is removed, not redriven.
  A redriven message takes a new acceptance sequence and rejoins its group as a new send
  would: behind the group's head, if the group has one.
  Returns: {outcome, count, lowered_due}; outcome NO_MESSAGE when msg_id is not a dead letter.
  Memory: first write ZREM dead: runs over maxmemory (it moves, never adds, a message).
  Publishes "<k> <topic>" when k redriven messages are ready. ]]
--@include settings
--@include fanout
local now, msg_id = tonumber(ARGV[1]), ARGV[2]
local limit, channel, topic = tonumber(ARGV[3]), ARGV[4], ARGV[5]

local slots
if msg_id ~= '' then
  local m = find_message(tk.msgs, msg_id)
  if not m or not redis.call('ZSCORE', tk.dead, m.slot) then return {NO_MESSAGE, 0, -1} end
  slots = {m.slot}
else
  slots = redis.call('ZRANGE', tk.dead, 0, limit - 1)
end
local s = topic_settings(tk.config, tk.topic_config)
local count = 0
for _, slot in ipairs(slots) do
  redis.call('ZREM', tk.dead, slot)
  local m = load_slot(tk.msgs, slot)
  local dead_letter = m and tonumber(m[STATUS]) == Status.RETRY_EXHAUSTED
  if dead_letter and not retained(m, tk.ended, now) then
    drop_message(tk.msgs, tk.ended, tk.dead, slot, now)   -- past its retention: gone, not redriven
  elseif dead_letter then
    -- The default subscription's redrive gives the topic's record a new life and sequence:
    -- the bare entries named subscriptions still hold of it keep the old ones, as records.
    if not tk.sub and held_by_subscriptions(slot) then
      in_each_subscription(function()
        local due = bare_entry(m)
        if due then
          local d = fresh_delivery(m, due)
          zadd_due(tk.expire, d[EXPIRE_TIME], slot)
          save_message(tk.msgs, d)
        end
      end)
    end
    redis.call('ZREM', tk.ended, slot)
    m[TRIGGER_TIME], m[EXPIRE_TIME], m[DELIVERIES] = now, now + s.ttlMillis, 0
    m.dt, m.seq, m.blocked = nil, next_seq(), false
    if not m[GROUP] or join_group(m) then
      place(m, now, now)
    end
    save_message(tk.msgs, m)
    count = count + 1
  end
end
publish_advanced(channel, topic, now)
if msg_id ~= '' and count == 0 then return {NO_MESSAGE, 0, -1} end
return {OK, count, due_lowered()}
