--[[ Expiry: a message whose expireTime has passed ends without another delivery.
  Driven by the expiry index, so the cost is O(log n) per expired message, never a scan.
  The index holds ready and consuming messages (promotion adds them; waiting ones enter it
  when promoted, since they cannot expire before their triggerTime; a waiting entry left by
  an older version is still honoured).
  waiting (1) / ready (2) -> expired (5) if never delivered, else retry exhausted (6, a dead
  letter). A consuming (3) message only leaves the index: its consumer may still ack it, and
  the ack timeout ends it (6) instead of redelivering.
  KEYS[1] waiting  KEYS[2] ready  KEYS[3] ack  KEYS[4] expire  KEYS[5] dead  (zsets)
  KEYS[6] config   hash  the topic's settings (read only)
  ARGV[1] msg_prefix (same hash tag)  ARGV[2] now_ms  ARGV[3] limit (<= 1000)
  ARGV[4] end_life_ms  ARGV[5..13] the server's default settings
  Returns: {expired, exhausted, scanned, due, dead}; the caller repeats while scanned equals
  limit. due: the topic's next due time, -1 when it holds nothing live; dead: how many of
  the exhausted became dead letters.
  Memory: drains (first write ZREM): runs over maxmemory. ]]
--@include dead_letter
local waiting, ready, ack, expire, dead, config =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local msg_prefix, now, limit = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local end_life = tonumber(ARGV[4])

local due = redis.call('ZRANGEBYSCORE', expire, '-inf', now, 'LIMIT', 0, limit)
local expired, exhausted, dead_lettered = 0, 0, 0
local s = #due > 0 and topic_settings(config)
for _, id in ipairs(due) do
  if redis.call('ZREM', expire, id) == 1 then
    local key = msg_prefix .. id
    local m = read_message(key)
    local status = m and tonumber(m[7])
    if status == 1 or status == 2 then
      redis.call('ZREM', status == 1 and waiting or ready, id)
      if tonumber(m[6]) == 0 then
        end_message(key, 5, end_life)
        expired = expired + 1
      else
        dead_lettered = dead_lettered + end_exhausted(key, id, dead, msg_prefix, now, end_life, s)
        exhausted = exhausted + 1
      end
    end
  end
end
return {expired, exhausted, #due, due_at(waiting, ack, expire) or -1, dead_lettered}
