--[[ Expiry: a message whose expireTime has passed ends without another delivery.
  Driven by the expiry index, so the cost is O(log n) per expired message, never a scan.
  The index holds ready and consuming messages (promotion adds them; waiting ones enter it
  when promoted, since they cannot expire before their triggerTime; a waiting entry left by
  an older version is still honoured).
  waiting (1) -> expired (5); ready (2) -> expired (5) if never delivered, else retry
  exhausted (6). A consuming (3) message only leaves the index: its consumer may still ack
  it, and the ack timeout ends it (6) instead of redelivering.
  KEYS[1] waiting  KEYS[2] ready  KEYS[3] ack  KEYS[4] expire  (zsets)
  ARGV[1] msg_prefix (same hash tag)  ARGV[2] now_ms  ARGV[3] limit (<= 1000)
  ARGV[4] end_life_ms
  Returns: {expired, exhausted, scanned, due}; the caller repeats while scanned equals limit.
    due  the topic's next due time, -1 when it holds nothing live.
  Memory: drains (first write ZREM): runs over maxmemory. ]]
--@include message
local waiting, ready, ack, expire = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local msg_prefix, now, limit = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local end_life = tonumber(ARGV[4])

local due = redis.call('ZRANGEBYSCORE', expire, '-inf', now, 'LIMIT', 0, limit)
local expired, exhausted = 0, 0
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
        end_message(key, 6, end_life)
        exhausted = exhausted + 1
      end
    end
  end
end
return {expired, exhausted, #due, due_at(waiting, ack, expire) or -1}
