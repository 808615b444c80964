--[[ Expiry: a message whose expireTime has passed ends without another delivery; then the
  records whose retention ended are purged.
  Driven by the expiry index, so the cost is O(log n) per expired message, never a scan.
  The index holds ready and consuming messages (promotion adds them; waiting ones enter it
  when promoted, since they cannot expire before their triggerTime).
  waiting (1) / ready (2) -> expired (5) if never delivered, else retry exhausted (6, a dead
  letter). A consuming (3) message only leaves the index: its consumer may still ack it, and
  the ack timeout ends it (6) instead of redelivering.
  Purge: at most `limit` ended records (4..7, dead letters too) whose `ended` score (the end
  of their retention) is <= now are removed, with their dead-queue entry.
  KEYS[1] waiting  KEYS[2] ready  KEYS[3] ack  KEYS[4] expire  KEYS[5] dead  (zsets)
  KEYS[6] config   hash  the topic's settings (read only)
  KEYS[7] msgs     hash  slot -> record   KEYS[8] ended  zset  slot -> end of retention
  ARGV[1] now_ms  ARGV[2] limit (<= 1000)  ARGV[3] end_life_ms
  ARGV[4..12] the server's default settings
  Returns: {expired, exhausted, scanned, due, dead, purged}; the caller repeats while scanned
  or purged equals limit. due: the topic's next due time, -1 when it holds nothing (live or
  retained); dead: how many of the exhausted became dead letters.
  Memory: drains (first write ZREM): runs over maxmemory, and frees the ended records. ]]
--@include dead_letter
local waiting, ready, ack, expire, dead, config, msgs, ended =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8]
local now, limit, end_life = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local tk = {waiting = waiting, ready = ready, ack = ack, expire = expire, dead = dead,
  config = config, msgs = msgs, ended = ended}   -- by name, for includes/dead_letter.lua

local due = redis.call('ZRANGEBYSCORE', expire, '-inf', now, 'LIMIT', 0, limit)
local expired, exhausted, dead_lettered = 0, 0, 0
local s = #due > 0 and topic_settings(config)
for _, slot in ipairs(due) do
  if redis.call('ZREM', expire, slot) == 1 then
    local m = load_slot(msgs, slot)
    local status = m and tonumber(m[STATUS])
    if status == Status.WAITING or status == Status.READY then
      redis.call('ZREM', status == Status.WAITING and waiting or ready, slot)
      if tonumber(m[DELIVERIES]) == 0 then
        end_message(msgs, ended, m, Status.EXPIRED, now, end_life)
        expired = expired + 1
      else
        dead_lettered = dead_lettered + end_exhausted(tk, m, now, end_life, s)
        exhausted = exhausted + 1
      end
    end
  end
end
local purged = purge_ended(msgs, ended, dead, now, limit)
return {expired, exhausted, #due, due_at(waiting, ack, expire, ended) or -1, dead_lettered,
  purged}
