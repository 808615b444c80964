--[[ Ending a message with status 6 (retry exhausted), and the dead-letter queue.
  A dead letter keeps its hash (status 6, TTL = deadLetterRetentionMillis) and sits in the
  topic's dead queue, scored by the time it died; at most deadLetterMaxSize are kept. ]]
--@include message
--@include settings
local DEAD_TRIM_LIMIT = 100   -- most dead letters one call drops for size or age

-- Drop at most `limit` dead letters past the topic's retention or beyond its max size,
-- oldest first. Returns how many were dropped.
local function trim_dead(dead, msg_prefix, now, s, limit)
  local dropped = 0
  local function drop(id)
    redis.call('ZREM', dead, id)
    local key = msg_prefix .. id
    if redis.call('HGET', key, 's') == '6' then redis.call('DEL', key) end
    dropped = dropped + 1
  end
  local old = redis.call('ZRANGEBYSCORE', dead, '-inf',
    '(' .. (now - s.deadLetterRetentionMillis), 'LIMIT', 0, limit)
  for _, id in ipairs(old) do drop(id) end
  local excess = math.min(redis.call('ZCARD', dead) - s.deadLetterMaxSize, limit - dropped)
  if excess > 0 then
    for _, id in ipairs(redis.call('ZRANGE', dead, 0, excess - 1)) do drop(id) end
  end
  return dropped
end

-- End a message with status 6: into the dead queue when the topic keeps dead letters, else
-- kept end_life_ms like any ended message. Returns 1 when it became a dead letter, else 0.
local function end_exhausted(key, id, dead, msg_prefix, now, end_life, s)
  if s.deadLetter ~= 1 then
    end_message(key, 6, end_life)
    return 0
  end
  redis.call('HSET', key, 's', 6)
  redis.call('PEXPIRE', key, s.deadLetterRetentionMillis)
  redis.call('ZADD', dead, now, id)
  trim_dead(dead, msg_prefix, now, s, DEAD_TRIM_LIMIT)
  return 1
end

-- Give a delivery back (nack, ack timeout, changeVisibility 0); the caller took it out of
-- ack. Ready again at the tail of the queue when `delay` <= 0, waiting until now + delay
-- otherwise; ended with status 6 when its deliveries are used up or the redelivery would
-- come at or after its expireTime (a redelivery never lengthens a message's life).
-- Updates m and returns (new status, 1 if dead-lettered else 0).
local function redeliver(key, id, m, queues, msg_prefix, now, delay, end_life, s)
  local waiting, ready, expire, dead = queues[1], queues[2], queues[4], queues[5]
  local due = now + math.max(delay, 0)
  if tonumber(m[6]) >= tonumber(m[5]) + 1 or due >= tonumber(m[4]) then
    redis.call('ZREM', expire, id)
    m[7] = '6'
    return 6, end_exhausted(key, id, dead, msg_prefix, now, end_life, s)
  end
  if delay <= 0 then
    redis.call('ZADD', ready, now, id)   -- behind the messages already ready
    redis.call('HSET', key, 's', 2)
    m[7] = '2'
    return 2, 0
  end
  redis.call('ZREM', expire, id)         -- waiting messages are not in the expiry index
  redis.call('ZADD', waiting, due, id)
  redis.call('HSET', key, 's', 1, 't', due)
  m[3], m[7] = tostring(due), '1'
  return 1, 0
end
