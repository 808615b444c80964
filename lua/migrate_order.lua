--[[ Convert a topic of storage format records-1 to records-2: every member of `ready` that is
  a bare slot (records-1) becomes its ready member (includes/group.lua): the message takes
  the topic's next acceptance sequence and keeps its score. Idempotent: a member that is no
  slot of a record (already converted) is skipped. Waiting and consuming records keep no
  sequence (they read as 0) until they are sent again.
  KEYS: the topic's 12 keys (includes/keys.lua).
  ARGV[1..] members of ready (<= 1000), as ZSCAN found them
  Returns: {converted, skipped}
  Memory: first write ZREM: runs over maxmemory (it renames, never adds, an entry). ]]
--@include group
local converted, skipped = 0, 0
for _, member in ipairs(ARGV) do
  local score = redis.call('ZSCORE', tk.ready, member)
  local m = score and load_slot(tk.msgs, member)
  if m then
    redis.call('ZREM', tk.ready, member)
    m.seq = next_seq()
    save_message(tk.msgs, m)
    redis.call('ZADD', tk.ready, score, ready_member(m))
    converted = converted + 1
  else
    skipped = skipped + 1
  end
end
return {converted, skipped}
