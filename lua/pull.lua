--[[ Hand out up to `count` ready messages: ready (2) -> consuming (3), in the order they
  became ready (equal times: in acceptance order). Only a group's front is ever ready, so a
  pull hands out at most one message per group and never looks at blocked ones. Promotes this topic's due messages first, so a consumer arriving at the due
  time never waits for a scheduler. A message past its expireTime, or past its deliveries,
  is never handed out: it ends (5 if never delivered, else 6, a dead letter).
  Each delivery gets a new receipt (field c): only it can ack, nack or extend the delivery.
  KEYS: the 19 keys (includes/keys.lua); config is read only.
  ARGV[1] now_ms  ARGV[2] count (<= 1000; the API's `batch`)
  ARGV[3] ack_timeout_ms (-1: the topic's)
  ARGV[4] end_life_ms  ARGV[5] promote limit  ARGV[6] hint channel  ARGV[7] topic
  ARGV[8] '' for a consumer's pull; "push <concurrency> <timeout_ms>" for the push delivery
          loop's, with the server's pushConcurrency and pushTimeoutMillis
  ARGV[9]  "<hub id> <lease_ms>" for a long poll's pull ('' otherwise): when it hands out
          nothing (the poll waits), the hub is registered to take the topic's hints for
          lease_ms (includes/group.lua publish_ready)
  ARGV[10..] the server's default settings
  A push subscription (its config has pushUrl) is pushed, not pulled: a consumer's pull there
  is refused with the error "PUSHSUBSCRIPTION" before anything is read or written. The push
  loop's pull hands out at most pushConcurrency minus the deliveries consuming now (so the
  fleet never has more in flight, however many nodes pull), each with the ack deadline
  max(ackTimeoutMillis, pushTimeoutMillis + 1 s): the ack timeout never fires while a POST
  may still be answered. Where pushUrl is not set (any more), it hands out nothing.
  Returns: {messages, promoted, gaps, ended, next_trigger, ready_left, lowered_due, dead}
    messages     list of {msgId, m, p, t, e, r, n, s, a, c} as stored after the pull
    promoted     moved waiting -> ready by this call; gaps: their promotion gaps (ms)
    ended        messages ended here (expired or out of deliveries) instead of handed out
    next_trigger triggerTime of the earliest waiting message (in a named subscription, or
                 still in the topic's fan-out), -1 if none
    ready_left   ready messages still queued after this pull
    lowered_due  the topic's new due time if this pull brought it forward, else -1
    dead         how many of the ended became dead letters
  A paused topic (pauseTopic) hands nothing out: the pull still promotes and answers the
  counts, but pops nothing and publishes nothing.
  Memory: drains (first write ZREM or ZPOPMIN): runs over maxmemory, so a full Redis drains.
  Publishes "<ready_left> <topic>" when it promoted messages, or made a group's next message
  ready, and did not hand them all out, so consumers held on other processes take them
  (publish_ready: to one waiting hub). ]]
--@include promote
--@include dead_letter
--@include fanout
local now, count, ack_timeout = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local end_life, promote_limit = tonumber(ARGV[4]), tonumber(ARGV[5])
local channel, topic = ARGV[6], ARGV[7]
local push_concurrency, push_timeout = string.match(ARGV[8], '^push (%d+) (%d+)$')
local waiting_hub, hub_lease = string.match(ARGV[9], '^(%S+) (%d+)$')
hub_lease = tonumber(hub_lease)

local s = topic_settings(tk.config, tk.topic_config)
if ack_timeout < 0 then ack_timeout = s.ackTimeoutMillis end
if s.pushUrl and not push_concurrency then
  return redis.error_reply('PUSHSUBSCRIPTION ' .. (tk.sub or 'default'))
end
if push_concurrency then
  if not s.pushUrl then
    count = 0
  else
    local in_flight = redis.call('ZCARD', tk.ack)
    count = math.max(0, math.min(count,
      (s.pushConcurrency or tonumber(push_concurrency)) - in_flight))
    ack_timeout = math.max(ack_timeout, (s.pushTimeoutMillis or tonumber(push_timeout)) + 1000)
  end
end
-- The waiting head: promote only when it is due, and answer it as the next trigger time
-- unless this call changed waiting (read again below).
local head = redis.call('ZRANGE', tk.waiting, 0, 0, 'WITHSCORES')
local promoted, gaps = 0, {}
if head[2] and tonumber(head[2]) <= now then
  promoted, gaps = promote(now, promote_limit)
  head = false
end
local fanned = fan_out(now, promote_limit)

local messages, ended_here, dead_lettered = {}, 0, 0
-- Bounded work: skipping dead entries costs at most `count` extra pops per call.
local pops_left = s.paused and 0 or count * 2
while #messages < count and pops_left > 0 do
  local popped = redis.call('ZPOPMIN', tk.ready)
  if not popped[1] then break end
  pops_left = pops_left - 1
  local slot = member_slot(popped[1])
  local m = load_ready(slot, popped[2])
  if not m then
    redis.call('ZREM', tk.expire, slot)
  else
    local deliveries, max_retry = tonumber(m[DELIVERIES]), tonumber(m[MAX_RETRY])
    if now >= tonumber(m[EXPIRE_TIME]) or deliveries >= max_retry + 1 then
      if deliveries == 0 then
        end_message(m, Status.EXPIRED, now, end_life, s.dedupWindowMillis)
      else
        dead_lettered = dead_lettered + end_exhausted(m, now, end_life, s)
      end
      ended_here = ended_here + 1
    else
      m[DELIVERIES], m[STATUS], m.dt = deliveries + 1, Status.CONSUMING, now
      -- first delivery in a named subscription: its expiry is this subscription's from now
      if m.fresh then zadd_due(tk.expire, m[EXPIRE_TIME], slot) end
      save_message(tk.msgs, m)
      zadd_due(tk.ack, now + ack_timeout, slot)
      table.insert(m, 1, m.id)
      messages[#messages + 1] = m
    end
  end
end

local ready_left = redis.call('ZCARD', tk.ready)
if fanned > 0 then   -- handed to the named subscriptions: their consumers wake too
  publish_hint(channel, topic, math.max(ready_left, fanned))
elseif advanced.readied > 0 and ready_left > 0 and not s.paused then   -- promoted, or a group's next released
  publish_ready(channel, topic, ready_left, now)
end
-- A long poll about to wait: its hub takes hints for the topic until the lease ends
-- (includes/group.lua publish_ready); lapsed hubs leave. The removal first: it is a write
-- that is not deny-oom, so an empty pull still runs over maxmemory (see Memory above).
if waiting_hub and #messages == 0 and not tk.sub then
  redis.call('ZREMRANGEBYSCORE', HUBS, '-inf', '(' .. now)
  redis.call('ZADD', HUBS, now + hub_lease, waiting_hub)
end
-- An ended message may have released its group's next one into waiting, and a grouped one
-- fanned out may wait in this subscription: read the head again then.
if not head or ended_here > 0 or fanned > 0 then
  head = redis.call('ZRANGE', tk.waiting, 0, 0, 'WITHSCORES')
end
local next_trigger = head[2] and tonumber(head[2]) or -1
if tk.sub then   -- a named subscription's next message may still be in the fan-out
  local fanning = redis.call('ZRANGE', tk.fanout, 0, 0, 'WITHSCORES')
  if fanning[2] and (next_trigger < 0 or tonumber(fanning[2]) < next_trigger) then
    next_trigger = tonumber(fanning[2])
  end
end
return {messages, promoted, gaps, ended_here, next_trigger, ready_left, due_lowered(),
  dead_lettered}
