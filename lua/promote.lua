--[[ Move due messages from waiting (1) to ready (2), in the default subscription and in every
  named one, and hand due messages to the named subscriptions (includes/fanout.lua).
  KEYS: the 19 keys (includes/keys.lua).
  ARGV[1] now_ms  ARGV[2] limit (<= 1000)  ARGV[3] hint channel  ARGV[4] topic
  Returns: {moved, gaps, due}; the caller repeats while moved equals limit.
    due  the topic's next due time (its subscriptions' included), -1 when it holds nothing
         (live or retained).
  Memory: drains (first write ZREM): runs over maxmemory, so due messages still reach consumers.
  Publishes "<moved> <topic>" when it moved anything. ]]
--@include promote
--@include fanout
local now, limit = tonumber(ARGV[1]), tonumber(ARGV[2])
local channel, topic = ARGV[3], ARGV[4]

local moved, gaps = promote(now, limit)
fan_out(now, limit)
-- Each named subscription's own waiting messages (redeliveries after a backoff).
in_each_subscription(function()
  local more, more_gaps = promote(now, limit)
  moved = moved + more
  for _, gap in ipairs(more_gaps) do gaps[#gaps + 1] = gap end
end)
publish_advanced(channel, topic, now)
return {moved, gaps, record_due(topic_due()) or -1}
