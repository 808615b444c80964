--[[ Move a waiting (1) or ready (2) message to a new triggerTime (in every named subscription
  too: only while none of them has begun delivering it, else CONSUMING): waiting again, or ready
  (at the tail of the queue) when due now; its expireTime moves with it (the same ttl).
  KEYS: the 19 keys (includes/keys.lua).
  ARGV[1] msg_id  ARGV[2] now_ms  ARGV[3] trigger_ms (a past one means now)
  ARGV[4] hint channel  ARGV[5] topic
  Returns: {outcome, fields, lowered_due}
    outcome  OK; CONSUMING being consumed (400); NO_MESSAGE unknown or ended (404)
  Memory: first write ZREM: runs over maxmemory (it moves, never adds, a message).
  Groups: a blocked message takes its new place in its group's order (before a front that
  was never delivered, that front steps back behind it); a front never delivered stays front
  unless the group's next message now comes first; a delivered head stays head.
  Publishes "<k> <topic>" when k messages became ready (it, or its group's new front). ]]
--@include fanout
local msg_id, now, trigger = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local channel, topic = ARGV[4], ARGV[5]

local m = find_message(tk.msgs, msg_id)
if not m then return {NO_MESSAGE, {}, -1} end
local status = tonumber(m[STATUS])
local in_default = is_live(status) and not m.detached
local member = queue_member(m)
local fanning = redis.call('ZSCORE', tk.fanout, member)
local held = held_by_subscriptions(m.slot)
if in_default and status == Status.CONSUMING then return {CONSUMING, m, -1} end
if not in_default and not fanning and not held then return {NO_MESSAGE, m, -1} end
-- Named subscriptions: only while none of them has begun delivering it (a grouped one has a
-- record there from the fan-out on, never delivered: ready, or blocked behind its group).
if held then
  local delivered = false
  in_each_subscription(function()
    local d = load_slot(tk.msgs, m.slot)
    if d and (tonumber(d[DELIVERIES]) > 0 or not is_live(d[STATUS])) then delivered = true end
  end)
  if delivered then return {CONSUMING, m, -1} end
end

if trigger < now then trigger = now end
redis.call('ZREM', tk.fanout, member)   -- first write ZREM (see Memory above)
if held then
  in_each_subscription(function()
    local d = load_slot(tk.msgs, m.slot)
    if d then   -- out of its place and its group there (the group's next may take over)
      leave(d, now)
      redis.call('HDEL', tk.msgs, m.slot)
    else
      redis.call('ZREM', tk.ready, member)
    end
  end)
  redis.call('HDEL', tk.refs, m.slot)
  redis.call('ZREM', tk.sexpire, m.slot)
end
local was_blocked = m.blocked
if in_default then unqueue(m) end   -- by its old place
m[EXPIRE_TIME] = trigger + tonumber(m[EXPIRE_TIME]) - tonumber(m[TRIGGER_TIME])
m[TRIGGER_TIME] = trigger
if in_default then
  local front = true
  if m[GROUP] and was_blocked then
    front = join_group(m)
  elseif m[GROUP] and tonumber(m[DELIVERIES]) == 0 then
    front = settle_front(m, now)
  end
  if front then place(m, now, now) end
end
-- headed for the named subscriptions again, at its new time
if fanning or held then zadd_due(tk.fanout, trigger, member) end
save_message(tk.msgs, m)
if fanning or held then fan_out(now, 1) end
publish_advanced(channel, topic, now)
return {OK, shown_status(m, now), due_lowered()}
