--[[ Enforce the topic's dead-letter retention and max size now (after its settings were
  lowered): drop at most `limit` dead letters, oldest first; the caller repeats while the
  count equals the limit.
  KEYS[1] waiting  KEYS[2] ready  KEYS[3] ack  KEYS[4] expire  KEYS[5] dead  (zsets)
  KEYS[6] config   hash  (dead and config are used)
  ARGV[1] msg_prefix  ARGV[2] now_ms  ARGV[3] limit (<= 1000)
  ARGV[4..12] the server's default settings
  Returns: how many were dropped.
  Memory: shrinks (first write ZREM). ]]
--@include dead_letter
local dead, config = KEYS[5], KEYS[6]
local msg_prefix, now, limit = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])

return trim_dead(dead, msg_prefix, now, topic_settings(config), limit)
