--[[ Ack timeouts: consuming (3) past its deadline is given back after the topic's
  redelivery backoff: ready (2) at the tail of the queue (no backoff), waiting (1) until the
  backoff ends, or retry exhausted (6, a dead letter) when its deliveries are used up or the
  redelivery would come at or after its expireTime.
  KEYS[1] waiting  KEYS[2] ready  KEYS[3] ack  KEYS[4] expire  KEYS[5] dead  (zsets)
  KEYS[6] config   hash  the topic's settings (read only)
  KEYS[7] msgs     hash  slot -> record   KEYS[8] ended  zset  slot -> end of retention
  ARGV[1] now_ms  ARGV[2] limit (<= 1000)  ARGV[3] end_life_ms  ARGV[4] hint channel
  ARGV[5] topic  ARGV[6..14] the server's default settings
  Returns: {requeued, ended, due, dead}; the caller repeats while requeued + ended equals limit.
    due   the topic's next due time, -1 when it holds nothing (live or retained).
    dead  how many of the ended became dead letters
  Memory: drains (first write ZREM): runs over maxmemory.
  Publishes "<n> <topic>" when it made n messages ready. ]]
--@include dead_letter
local waiting, ready, ack, expire, dead, config, msgs, ended =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8]
local now, limit = tonumber(ARGV[1]), tonumber(ARGV[2])
local end_life, channel, topic = tonumber(ARGV[3]), ARGV[4], ARGV[5]
local tk = {waiting = waiting, ready = ready, ack = ack, expire = expire, dead = dead,
  config = config, msgs = msgs, ended = ended}   -- by name, for includes/dead_letter.lua

local late = redis.call('ZRANGEBYSCORE', ack, '-inf', now, 'LIMIT', 0, limit)
local requeued, ended_here, readied, dead_lettered = 0, 0, 0, 0
local s = #late > 0 and topic_settings(config)
for _, slot in ipairs(late) do
  if redis.call('ZREM', ack, slot) == 1 then
    local m = load_slot(msgs, slot)
    if m and tonumber(m[STATUS]) == Status.CONSUMING then
      local delay = backoff(s, tonumber(m[DELIVERIES]))
      local status, d = redeliver(tk, m, now, delay, end_life, s)
      if status == Status.RETRY_EXHAUSTED then
        ended_here, dead_lettered = ended_here + 1, dead_lettered + d
      else
        requeued = requeued + 1
        if status == Status.READY then readied = readied + 1 end
      end
    end
  end
end
if readied > 0 then
  redis.call('PUBLISH', channel, readied .. ' ' .. topic)
end
return {requeued, ended_here, due_at(waiting, ack, expire, ended) or -1, dead_lettered}
