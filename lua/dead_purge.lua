--[[ Remove dead letters for good: one, or the oldest `limit` (the caller repeats for all).
  KEYS[1] waiting  KEYS[2] ready  KEYS[3] ack  KEYS[4] expire  KEYS[5] dead  (zsets)
  KEYS[6] config   hash  (only dead is touched)
  ARGV[1] msg_prefix  ARGV[2] msg_id ('' = the oldest `limit`)  ARGV[3] limit (<= 1000)
  Returns: {outcome, count}; outcome NO_MESSAGE when msg_id is not a dead letter.
  Memory: shrinks (first write ZREM). ]]
--@include outcome
local dead = KEYS[5]
local msg_prefix, msg_id, limit = ARGV[1], ARGV[2], tonumber(ARGV[3])

local ids
if msg_id ~= '' then
  if not redis.call('ZSCORE', dead, msg_id) then return {NO_MESSAGE, 0} end
  ids = {msg_id}
else
  ids = redis.call('ZRANGE', dead, 0, limit - 1)
end
for _, id in ipairs(ids) do
  redis.call('ZREM', dead, id)
  local key = msg_prefix .. id
  if redis.call('HGET', key, 's') == '6' then redis.call('DEL', key) end
end
return {OK, #ids}
