--[[ Expiry, in the default subscription and in every named one (and their bare entries,
  through the topic's sexpire index): a message whose expireTime has passed ends without another delivery; then the
  records whose retention ended are purged.
  Driven by the expiry index, so the cost is O(log n) per expired message, never a scan.
  The index holds ready, consuming and group-blocked messages (promotion adds them; waiting ones enter it
  when promoted, since they cannot expire before their triggerTime).
  waiting (1) / ready (2) -> expired (5) if never delivered, else retry exhausted (6, a dead
  letter). A consuming (3) message only leaves the index: its consumer may still ack it, and
  the ack timeout ends it (6) instead of redelivering.
  Purge: at most `limit` ended records (4..7, dead letters too) whose `ended` score (the end
  of their retention) is <= now are removed, with their dead-queue entry.
  KEYS: the 19 keys (includes/keys.lua).
  ARGV[1] now_ms  ARGV[2] limit (<= 1000)  ARGV[3] end_life_ms  ARGV[4] hint channel
  ARGV[5] topic  ARGV[6..] the server's default settings
  A blocked message of a group expires where it waits; an expired group front releases its
  group (published as a hint when the next one is ready).
  Returns: {expired, exhausted, scanned, due, dead, purged}; the caller repeats while scanned
  or purged equals limit. due: the topic's next due time, -1 when it holds nothing (live or
  retained); dead: how many of the exhausted became dead letters.
  Memory: drains (first write ZREM): runs over maxmemory, and frees the ended records. ]]
--@include dead_letter
--@include fanout
local now, limit, end_life = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local channel, topic = ARGV[4], ARGV[5]

local expired, exhausted, dead_lettered, scanned, purged = 0, 0, 0, 0, 0

local function end_expired(m, s)
  if tonumber(m[DELIVERIES]) == 0 then
    end_message(m, Status.EXPIRED, now, end_life, s.dedupWindowMillis)
    expired = expired + 1
  else
    dead_lettered = dead_lettered + end_exhausted(m, now, end_life, s)
    exhausted = exhausted + 1
  end
end

-- Expiry and purge in the current context (the default subscription, or a named one).
local function expire_here()
  local due = redis.call('ZRANGEBYSCORE', tk.expire, '-inf', now, 'LIMIT', 0, limit)
  local s = #due > 0 and topic_settings(tk.config, tk.topic_config)
  for _, slot in ipairs(due) do
    if redis.call('ZREM', tk.expire, slot) == 1 then
      local m = load_slot(tk.msgs, slot)
      local status = m and tonumber(m[STATUS])
      if status == Status.WAITING or status == Status.READY then end_expired(m, s) end
    end
  end
  scanned = math.max(scanned, #due)
  purged = math.max(purged, purge_ended(tk.msgs, tk.ended, tk.dead, now, limit))
end

-- The bare entries of named subscriptions (ready there, never delivered: no record) whose
-- expireTime has passed, through the topic's sexpire index: they end (5) in every
-- subscription that still holds them so.
local function expire_bare()
  local due = redis.call('ZRANGEBYSCORE', tk.sexpire, '-inf', now, 'LIMIT', 0, limit)
  for _, slot in ipairs(due) do
    redis.call('ZREM', tk.sexpire, slot)
    local tm = load_slot(tk.bodies, slot)
    if tm then
      in_each_subscription(function()
        local due = bare_entry(tm)
        if due then
          end_expired(fresh_delivery(tm, due), topic_settings(tk.config, tk.topic_config))
        end
      end)
    end
  end
  scanned = math.max(scanned, #due)
end

expire_here()
expire_bare()
in_each_subscription(expire_here)
publish_advanced(channel, topic, now)
return {expired, exhausted, scanned, record_due(topic_due()) or -1, dead_lettered, purged}
