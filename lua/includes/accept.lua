--[[ Accepting a new message: what sendMsg does for each message it writes, and what a
  schedule does for each occurrence it materialises (lua/schedule_*.lua), in one place.
  Its functions use the topic's keys by name (includes/keys.lua). ]]
--@include group

-- Write a new message with this msgId at `slot` (replacing `existing`, an ended record with
-- this msgId, when there is one): it takes the topic's next acceptance sequence (the INCR is
-- its first write: see send.lua's Memory note), joins its group when it has one, and is placed
-- (waiting, ready or blocked) and saved. `attributes` and `group` are false when none.
-- Returns the message and the entry that counts for the topic's due time: its triggerTime
-- when it waits, else its expireTime.
local function accept(now, msg_id, slot, existing, body, attributes, trigger, ttl, max_retry,
    group)
  local seq = next_seq()
  local expire_at = trigger + ttl
  -- A whole new record, so an ended message with this id is wholly replaced (same slot).
  local m = {id = msg_id, slot = slot, seq = seq}
  m[BODY], m[ATTRIBUTES] = body, attributes
  m[PRODUCE_TIME], m[TRIGGER_TIME], m[EXPIRE_TIME] = now, trigger, expire_at
  m[MAX_RETRY], m[DELIVERIES], m[STATUS] = max_retry, 0, Status.WAITING
  m[RECEIPT], m[GROUP] = false, group
  if existing then
    redis.call('ZREM', tk.ended, m.slot)
    redis.call('ZREM', tk.dead, m.slot)
  end
  local entry = expire_at
  if not m[GROUP] or join_group(m) then
    place(m, now, trigger)
    if m[STATUS] == Status.WAITING then entry = trigger end
  end
  save_message(tk.msgs, m)
  return m, entry
end
