--[[ Remove dead letters for good: one, or the oldest `limit` (the caller repeats for all).
  KEYS: the 19 keys (includes/keys.lua); only dead, msgs and ended are touched.
  ARGV[1] msg_id ('' = the oldest `limit`)  ARGV[2] limit (<= 1000)
  Returns: {outcome, count}; outcome NO_MESSAGE when msg_id is not a dead letter.
  Memory: shrinks (first write ZREM). ]]
--@include keys
--@include message
local dead, msgs, ended = tk.dead, tk.msgs, tk.ended
local msg_id, limit = ARGV[1], tonumber(ARGV[2])

local slots
if msg_id ~= '' then
  local m = find_message(msgs, msg_id)
  if not m or not redis.call('ZSCORE', dead, m.slot) then return {NO_MESSAGE, 0} end
  slots = {m.slot}
else
  slots = redis.call('ZRANGE', dead, 0, limit - 1)
end
for _, slot in ipairs(slots) do
  redis.call('ZREM', dead, slot)
  local record = redis.call('HGET', msgs, slot)
  if record and stored_status(record) == Status.RETRY_EXHAUSTED then
    drop_message(msgs, ended, dead, slot)
  end
end
return {OK, #slots}
