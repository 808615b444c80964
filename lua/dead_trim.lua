--[[ Enforce the topic's dead-letter retention and max size now (after its settings were
  lowered): drop at most `limit` dead letters, oldest first; the caller repeats while the
  count equals the limit.
  KEYS: the 19 keys (includes/keys.lua); dead, config, msgs, ended are used.
  ARGV[1] now_ms  ARGV[2] limit (<= 1000)  ARGV[3..11] the server's default settings
  Returns: how many were dropped.
  Memory: shrinks (first write ZREM). ]]
--@include dead_letter
local dead, config, msgs, ended = tk.dead, tk.config, tk.msgs, tk.ended
local now, limit = tonumber(ARGV[1]), tonumber(ARGV[2])

local trimmed = trim_dead(msgs, ended, dead, now, topic_settings(config, tk.topic_config), limit)
due_lowered()   -- bodies a named subscription let go are retained: their purge
return trimmed
