--[[ Ack timeouts, in the default subscription and in every named one: consuming (3) past its deadline is given back after the topic's
  redelivery backoff: ready (2) at the tail of the queue (no backoff), waiting (1) until the
  backoff ends, or retry exhausted (6, a dead letter) when its deliveries are used up or the
  redelivery would come at or after its expireTime.
  KEYS: the 19 keys (includes/keys.lua).
  ARGV[1] now_ms  ARGV[2] limit (<= 1000)  ARGV[3] end_life_ms  ARGV[4] hint channel
  ARGV[5] topic  ARGV[6..] the server's default settings
  Returns: {requeued, ended, due, dead}; the caller repeats while requeued + ended equals limit.
    due   the topic's next due time, -1 when it holds nothing (live or retained).
    dead  how many of the ended became dead letters
  Memory: drains (first write ZREM): runs over maxmemory.
  A grouped message stays its group's head until it ends; ended, it releases its group.
  Publishes "<n> <topic>" when it made n messages ready (its groups' next ones included). ]]
--@include dead_letter
--@include fanout
local now, limit = tonumber(ARGV[1]), tonumber(ARGV[2])
local end_life, channel, topic = tonumber(ARGV[3]), ARGV[4], ARGV[5]

local requeued, ended_here, dead_lettered = 0, 0, 0

-- The ack timeouts of the current context (the default subscription, or a named one).
local function time_out()
  local late = redis.call('ZRANGEBYSCORE', tk.ack, '-inf', now, 'LIMIT', 0, limit)
  local s = #late > 0 and topic_settings(tk.config, tk.topic_config)
  for _, slot in ipairs(late) do
    if redis.call('ZREM', tk.ack, slot) == 1 then
      local m = load_slot(tk.msgs, slot)
      if m and tonumber(m[STATUS]) == Status.CONSUMING then
        local delay = backoff(s, tonumber(m[DELIVERIES]))
        local status, d = redeliver(m, now, delay, end_life, s)
        if status == Status.RETRY_EXHAUSTED then
          ended_here, dead_lettered = ended_here + 1, dead_lettered + d
        else
          requeued = requeued + 1
        end
      end
    end
  end
end

time_out()
in_each_subscription(time_out)
publish_advanced(channel, topic, now)
return {requeued, ended_here, record_due(topic_due()) or -1, dead_lettered}
