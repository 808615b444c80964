--[[ Move due messages from waiting (1) to ready (2).
  KEYS: the topic's 12 keys (includes/keys.lua).
  ARGV[1] now_ms  ARGV[2] limit (<= 1000)  ARGV[3] hint channel  ARGV[4] topic
  Returns: {moved, gaps, due}; the caller repeats while moved equals limit.
    due  the topic's next due time, -1 when it holds nothing (live or retained).
  Memory: drains (first write ZREM): runs over maxmemory, so due messages still reach consumers.
  Publishes "<moved> <topic>" when it moved anything. ]]
--@include promote
local now, limit = tonumber(ARGV[1]), tonumber(ARGV[2])
local channel, topic = ARGV[3], ARGV[4]

local moved, gaps = promote(now, limit)
publish_advanced(channel, topic)
return {moved, gaps, due_at(tk.waiting, tk.ack, tk.expire, tk.ended) or -1}
