--[[ Free a deleted subscription's keys (subscription_delete.lua moved them to
  <topic base>:sd:<drop id>:<kind>), one bounded slice: at most `limit` of its records and of
  its ready entries, each letting go of the topic's record (unref: the body is freed when no
  subscription holds it and the default subscription has ended it), and at most `limit`
  entries of each of its other keys.
  KEYS[1..12] the dropped subscription's keys in includes/keys.lua order (seq: the topic's,
  untouched), KEYS[13..18] the topic's (includes/keys.lua)
  ARGV[1] limit  ARGV[2] now_ms  ARGV[3] HSCAN cursor of its records ('0' to start)
  Returns: {left, cursor}: the entries still to free (0: done, every key gone), and the
  cursor to pass to the next slice
  Memory: drains (first write ZREM or HDEL). ]]
--@include keys
--@include message
local limit, now, cursor = tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3]

-- Bare ready entries (no record) let go here; a record lets go when it is freed below.
local members = redis.call('ZRANGE', tk.ready, 0, limit - 1)
for _, member in ipairs(members) do
  redis.call('ZREM', tk.ready, member)
  local slot = string.sub(member, 13)
  if redis.call('HEXISTS', tk.msgs, slot) == 0 then unref(slot, now) end
end
local page = redis.call('HSCAN', tk.msgs, cursor, 'COUNT', limit)
local fields = page[2]
for i = 1, #fields, 2 do
  redis.call('HDEL', tk.msgs, fields[i])
  unref(fields[i], now)
end
local left = redis.call('ZCARD', tk.ready) + redis.call('HLEN', tk.msgs)
for _, kind in ipairs({'waiting', 'ack', 'expire', 'dead', 'ended', 'blocked', 'held'}) do
  redis.call('ZREMRANGEBYRANK', tk[kind], 0, limit - 1)
  left = left + redis.call('ZCARD', tk[kind])
end
if left == 0 then redis.call('DEL', tk.groups, tk.config) end
due_lowered()   -- bodies let go are retained: their purge (a Cluster's sweep lowers the index)
return {left, page[1]}
