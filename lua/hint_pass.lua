--[[ A hint routed to one process (includes/group.lua publish_ready) that its hub could not
  take in full: it passes the rest on to every process, and when it had no idle waiter of
  the topic at all it also leaves the topic's hub set, until one of its long polls waits
  there again (pull.lua registers it). So a process whose consumers are all busy stops
  drawing the topic's hints, and a fleet where nobody waits goes back to hints every
  process hears, at one call per process and topic instead of one per hint.
  KEYS[1] hubs  zset  hub id -> until when (ms) (TopicKeys.hubs)
  ARGV[1] hub id  ARGV[2] leave (1: it had no idle waiter)  ARGV[3] channel
  ARGV[4] count  ARGV[5] topic
  Returns: how many processes heard the hint.
  Memory: its first write is ZREM (not deny-oom): it runs over maxmemory. ]]
if ARGV[2] == '1' then redis.call('ZREM', KEYS[1], ARGV[1]) end
return redis.call('PUBLISH', ARGV[3], ARGV[4] .. ' ' .. ARGV[5])
