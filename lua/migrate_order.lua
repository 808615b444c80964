--[[ Convert a topic of storage format records-1 to records-2: every member of `waiting` or
  `ready` that is a bare slot (records-1) becomes its queue member (includes/group.lua): the
  message takes the topic's next acceptance sequence and keeps its score. Idempotent: a
  member that is no slot of a record (already converted) is skipped. Consuming records keep
  no sequence (they read as 0) until they are sent again.
  KEYS: the 19 keys (includes/keys.lua).
  ARGV[1] 'waiting' or 'ready'  ARGV[2..] members of that zset (<= 1000), as ZSCAN found them
  Returns: {converted, skipped}
  Memory: first write ZREM: runs over maxmemory (it renames, never adds, an entry). ]]
--@include group
local zset = ARGV[1] == 'waiting' and tk.waiting or tk.ready
local converted, skipped = 0, 0
for i = 2, #ARGV do
  local member = ARGV[i]
  local score = redis.call('ZSCORE', zset, member)
  local m = score and load_slot(tk.msgs, member)
  if m then
    redis.call('ZREM', zset, member)
    m.seq = next_seq()
    save_message(tk.msgs, m)
    redis.call('ZADD', zset, score, queue_member(m))
    converted = converted + 1
  else
    skipped = skipped + 1
  end
end
return {converted, skipped}
