--[[ Ending a message with status 6 (retry exhausted), and the dead-letter queue.
  A dead letter keeps its record (status 6) and sits in the topic's dead queue, scored by the
  time it died, and in `ended`, scored by the end of its retention (death +
  deadLetterRetentionMillis); at most deadLetterMaxSize are kept.
  Its functions use the topic's keys by name (includes/keys.lua). ]]
--@include group
--@include settings
local DEAD_TRIM_LIMIT = 100   -- most dead letters one call drops for size or age

-- Drop at most `limit` dead letters past the topic's retention or beyond its max size,
-- oldest first. Returns how many were dropped. One still inside the topic's dedup window
-- only leaves the dead queue: its record stays in `ended` (scored by the window's end at
-- least) as a status 6 that is no dead letter, so a re-send is still a duplicate.
local function trim_dead(msgs, ended, dead, now, s, limit)
  local dropped = 0
  local function drop(slot)
    redis.call('ZREM', dead, slot)
    local record = redis.call('HGET', msgs, slot)
    if record and stored_status(record) == Status.RETRY_EXHAUSTED and
        not (s.dedupWindowMillis > 0 and
             in_dedup_window(decode(record, slot), now, s.dedupWindowMillis)) then
      drop_message(msgs, ended, dead, slot, now)
    end
    dropped = dropped + 1
  end
  local old = redis.call('ZRANGEBYSCORE', dead, '-inf',
    '(' .. (now - s.deadLetterRetentionMillis), 'LIMIT', 0, limit)
  for _, slot in ipairs(old) do drop(slot) end
  local excess = math.min(redis.call('ZCARD', dead) - s.deadLetterMaxSize, limit - dropped)
  if excess > 0 then
    for _, slot in ipairs(redis.call('ZRANGE', dead, 0, excess - 1)) do drop(slot) end
  end
  return dropped
end

-- End a message with status 6: into the dead queue when the topic keeps dead letters, else
-- kept end_life_ms like any ended message (either at least the topic's dedup window). Returns 1 when it became a dead letter, else 0.
local function end_exhausted(m, now, end_life, s)
  if s.deadLetter ~= 1 then
    end_message(m, Status.RETRY_EXHAUSTED, now, end_life, s.dedupWindowMillis)
    return 0
  end
  end_message(m, Status.RETRY_EXHAUSTED, now, s.deadLetterRetentionMillis, s.dedupWindowMillis)
  redis.call('ZADD', tk.dead, now, m.slot)
  trim_dead(tk.msgs, tk.ended, tk.dead, now, s, DEAD_TRIM_LIMIT)
  return 1
end

-- Give a delivery back (nack, ack timeout, changeVisibility 0); m is consuming (its ack
-- entry may be gone already). Ready again at the tail of the queue when `delay` <= 0,
-- waiting until now + delay otherwise; ended with status 6 when its deliveries are used up
-- or the redelivery would come at or after its expireTime (a redelivery never lengthens a
-- message's life). A grouped message stays its group's head either way until it ends.
-- Updates m and returns (new status, 1 if dead-lettered else 0).
local function redeliver(m, now, delay, end_life, s)
  local due = now + math.max(delay, 0)
  if tonumber(m[DELIVERIES]) >= tonumber(m[MAX_RETRY]) + 1
      or due >= tonumber(m[EXPIRE_TIME]) then
    return Status.RETRY_EXHAUSTED, end_exhausted(m, now, end_life, s)
  end
  redis.call('ZREM', tk.ack, m.slot)
  if delay <= 0 then
    to_ready(m, now)                          -- behind the messages already ready
  else
    m[TRIGGER_TIME] = due
    to_waiting(m)
  end
  save_message(tk.msgs, m)
  return tonumber(m[STATUS]), 0
end
