--[[ Enforce the topic's dead-letter retention and max size now (after its settings were
  lowered): drop at most `limit` dead letters, oldest first; the caller repeats while the
  count equals the limit.
  KEYS[1] waiting  KEYS[2] ready  KEYS[3] ack  KEYS[4] expire  KEYS[5] dead  (zsets)
  KEYS[6] config   hash
  KEYS[7] msgs     hash  slot -> record   KEYS[8] ended  (dead, config, msgs, ended are used)
  ARGV[1] now_ms  ARGV[2] limit (<= 1000)  ARGV[3..11] the server's default settings
  Returns: how many were dropped.
  Memory: shrinks (first write ZREM). ]]
--@include dead_letter
local dead, config, msgs, ended = KEYS[5], KEYS[6], KEYS[7], KEYS[8]
local now, limit = tonumber(ARGV[1]), tonumber(ARGV[2])

return trim_dead(msgs, ended, dead, now, topic_settings(config), limit)
