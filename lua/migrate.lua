--[[ Convert messages of the older storage format (a HASH per message at
  <legacy prefix><msgId>, fields m p t e r n s a c, ended ones with a TTL) into records of the
  topic's msgs hash (includes/message.lua). Idempotent: a msgId without an old hash is
  skipped, so a slot or an id converted by an earlier run is left as it is.
  KEYS: the 19 keys (includes/keys.lua).
  ARGV[1] legacy msg prefix (same hash tag)  ARGV[2] now_ms  ARGV[3..] msgIds (<= 1000)
  Each message takes the topic's next acceptance sequence; its entries in waiting / ready /
  ack / expire / dead move to its slot (waiting, ready: its queue member) with their scores; an ended message's remaining TTL becomes its `ended` score; the old hash is deleted.
  Returns: {converted, skipped}
  Memory: grows by a record before it frees the old hash, so its first write is HSET
  (deny-oom): over maxmemory the batch is refused whole and can be re-run. ]]
--@include group
local prefix, now = ARGV[1], tonumber(ARGV[2])

local converted, skipped = 0, 0
for i = 3, #ARGV do
  local id = ARGV[i]
  local key = prefix .. id
  -- the old hash's fields, asked for in record order: HMGET answers a message's fields
  local m = redis.call('HMGET', key, 'm', 'p', 't', 'e', 'r', 'n', 's', 'a', 'c')
  if not m[STATUS] then
    skipped = skipped + 1
  else
    local _, slot = find_message(tk.msgs, id)
    m.id, m.slot, m[GROUP] = id, slot, false
    if m[RECEIPT] then m.dt = tonumber(string.match(m[RECEIPT], '^(%x+)%.'), 16) end
    local ttl = redis.call('PTTL', key)
    save_message(tk.msgs, m)   -- first (see Memory above)
    m.seq = next_seq()
    save_message(tk.msgs, m)
    for _, zset in ipairs({tk.waiting, tk.ready, tk.ack, tk.expire, tk.dead}) do
      local score = redis.call('ZSCORE', zset, id)
      if score then
        redis.call('ZREM', zset, id)
        local queue = zset == tk.waiting or zset == tk.ready
        redis.call('ZADD', zset, score, queue and queue_member(m) or m.slot)
      end
    end
    if not is_live(m[STATUS]) then
      redis.call('ZADD', tk.ended, now + math.max(ttl, 0), m.slot)
    end
    redis.call('DEL', key)
    converted = converted + 1
  end
end
return {converted, skipped}
