--[[ Where a live message sits, acceptance order, and message groups.
  Order: every accepted message gets the topic's next acceptance sequence (m.seq, INCR of
  tk.seq). `waiting` and `ready` hold each message as queue_member(m): its sequence in 12 hex
  digits, then its slot, so messages due (or ready) at the same millisecond are promoted and
  handed out in acceptance order (a zset orders equal scores by member; the score alone
  cannot hold the sequence). Promotion moves at most its limit a call in that order, so a
  pull between two calls still finds the earliest accepted ones ready.
  Groups: a group's messages are delivered one at a time, in order of (triggerTime, seq).
  Only the group's front sits in waiting / ready / ack: its first message, or, once that was
  delivered, that message until it ends (its head: a nack, an ack timeout or a reschedule keep
  it front). tk.groups maps the groupId to the front's slot. The group's other live messages
  are blocked: status 1 in the record with the blocked flag, in tk.blocked (lex order:
  groupId \0 trigger seq slot, so a group's next message is one ZRANGEBYLEX), in tk.held
  (by trigger time, for the counts) and in the expiry index (their ttl runs while blocked).
  A pull pops `ready` only, so it never sees a blocked message: its cost does not grow with
  the blocked groups or their backlog. When the front ends (end_message, every ending goes
  through it) the group's next message becomes front: ready when due, else waiting.
  A due blocked message is shown with status 2 (shown_status). ]]
--@include keys
--@include message

-- What this call moved, for its hint: readied the messages it made ready (to_ready counts
-- every one: publish_advanced announces them).
local advanced = {readied = 0}

local function hex12(x)
  return string.format('%012x', tonumber(x))
end

local function queue_member(m)
  return hex12(m.seq) .. m.slot
end

local function member_slot(member)
  return string.sub(member, 13)
end

local function blocked_member(m)
  return m[GROUP] .. '\0' .. hex12(m[TRIGGER_TIME]) .. hex12(m.seq) .. m.slot
end

local function blocked_slot(member)
  return string.sub(member, string.find(member, '\0', 1, true) + 25)
end

-- The next acceptance sequence of the topic.
local function next_seq()
  return redis.call('INCR', tk.seq)
end

-- Whether a comes before b in its group: (triggerTime, seq).
local function before(a, b)
  local ta, tb = tonumber(a[TRIGGER_TIME]), tonumber(b[TRIGGER_TIME])
  return ta < tb or (ta == tb and a.seq < b.seq)
end

-- A status as getMsg shows it: a blocked message that is due is ready (2), waiting behind
-- its group's head.
local function shown_status(m, now)
  if m.blocked and now and tonumber(m[TRIGGER_TIME]) <= now then m[STATUS] = num(Status.READY) end
  return m
end

local function to_ready(m, score)
  redis.call('ZADD', tk.ready, score, queue_member(m))
  zadd_due(tk.expire, m[EXPIRE_TIME], m.slot)
  m[STATUS] = Status.READY
  advanced.readied = advanced.readied + 1
end

local function to_waiting(m)
  zadd_due(tk.waiting, m[TRIGGER_TIME], queue_member(m))
  redis.call('ZREM', tk.expire, m.slot)   -- waiting messages are not in the expiry index
  m[STATUS] = Status.WAITING
end

-- Block m behind its group's front (the caller saves m).
local function block(m)
  m.blocked, m[STATUS] = true, Status.WAITING
  redis.call('ZADD', tk.blocked, 0, blocked_member(m))
  redis.call('ZADD', tk.held, m[TRIGGER_TIME], m.slot)
  zadd_due(tk.expire, m[EXPIRE_TIME], m.slot)
end

-- Take a live message out of wherever it sits (a blocked one stays its group's member only
-- in tk.groups, which it never is).
local function unqueue(m)
  if m.blocked then
    redis.call('ZREM', tk.blocked, blocked_member(m))
    redis.call('ZREM', tk.held, m.slot)
    m.blocked = false
  else
    local status = tonumber(m[STATUS])
    if status == Status.WAITING then redis.call('ZREM', tk.waiting, queue_member(m))
    elseif status == Status.READY then redis.call('ZREM', tk.ready, queue_member(m))
    elseif status == Status.CONSUMING then redis.call('ZREM', tk.ack, m.slot) end
  end
  redis.call('ZREM', tk.expire, m.slot)
end

-- Place a live message that is not blocked: ready (scored `ready_score`) when its trigger
-- time has come, else waiting.
local function place(m, now, ready_score)
  if tonumber(m[TRIGGER_TIME]) <= now then to_ready(m, ready_score) else to_waiting(m) end
end

-- The group's next message (by its order), or nil.
local function group_next(group)
  local first = redis.call('ZRANGEBYLEX', tk.blocked, '[' .. group .. '\0',
    '(' .. group .. '\1', 'LIMIT', 0, 1)
  if not first[1] then return nil end
  return load_slot(tk.msgs, blocked_slot(first[1]))
end

-- Make n, a blocked message, its group's front (saved).
local function make_front(n, now)
  unqueue(n)
  redis.call('HSET', tk.groups, n[GROUP], n.slot)
  place(n, now, n[TRIGGER_TIME])
  save_message(tk.msgs, n)
end

-- A new or re-timed message m of a group (not yet placed, not blocked, seq set) joins it:
-- true when it is the group's front (the caller places it), false when it is blocked
-- behind the front (done here; the caller saves m). A front never delivered steps back
-- behind m when m comes first; a delivered one stays head until it ends.
local function join_group(m)
  local group = m[GROUP]
  local front_slot = redis.call('HGET', tk.groups, group)
  if front_slot == m.slot then return true end
  local front = front_slot and load_slot(tk.msgs, front_slot)
  if not front then
    redis.call('HSET', tk.groups, group, m.slot)
    return true
  end
  if tonumber(front[DELIVERIES]) == 0 and before(m, front) then
    unqueue(front)
    block(front)
    save_message(tk.msgs, front)
    redis.call('HSET', tk.groups, group, m.slot)
    return true
  end
  block(m)
  return false
end

-- m, its group's front and never delivered, was re-timed and taken out of its place: it
-- stays front (true: the caller places it) unless the group's next message now comes first,
-- which becomes front instead while m is blocked (false; the caller saves m).
local function settle_front(m, now)
  local n = group_next(m[GROUP])
  if not n or before(m, n) then return true end
  block(m)
  make_front(n, now)
  return false
end

-- m (live, grouped or not) has left its place for good: when it was its group's front, the
-- group's next message becomes front, or the group is gone.
local function release_group(m, now)
  local group = m[GROUP]
  if not group or redis.call('HGET', tk.groups, group) ~= m.slot then return end
  local n = group_next(group)
  if n then make_front(n, now) else redis.call('HDEL', tk.groups, group) end
end

-- A live message leaves for good: out of every queue, its group released.
local function leave(m, now)
  unqueue(m)
  release_group(m, now)
end

-- End a live message, wherever it sits, with an ended status (4..7). Ended messages keep
-- their record for max(`retention`, `window`) ms (window: the topic's dedupWindowMillis; nil
-- counts as 0) so getMsg and a re-send's duplicate check see them: the record notes when it
-- ended (m.ended_at), `ended` holds the end of its retention; the scheduler purges it after.
local function end_message(m, status, now, retention, window)
  if is_live(m[STATUS]) then leave(m, now) end
  m[STATUS] = status
  m.ended_at = now
  save_message(tk.msgs, m)
  zadd_due(tk.ended, now + math.max(retention, window or 0), m.slot, PURGE_SLACK_MS)
end

-- The hubs (one per server process) holding long polls of the topic that wait: zset hub id
-- -> until when (ms) the hub said so (pull.lua registers it). A hint goes to one of them,
-- not to every process: one message made ready wakes one waiter, not one per process.
local HUBS = TOPIC_BASE .. ':hubs'   -- TopicKeys.hubs, KEYS[1] of hint_pass.lua

-- Tell the consumers that k messages became ready: "<k> <topic>" on the channel of one hub
-- that waits (a share of k on each of several, when k is larger), chosen by the time so
-- that successive hints take turns; on the channel every hub hears when none waits, the
-- topic has named subscriptions (a hub's waiters may be of one subscription only), or the
-- call works in one. A hub that cannot take its share passes it on to every hub; a share
-- nobody heard (the hub's process is gone; on a Cluster, subscribed through another node)
-- goes to every hub from here, and that hub leaves the set. On a Cluster of Redis >= 7 the
-- hint goes on the topic's shard channel to the processes waiting on it (publish_hint),
-- without reading the hub set: routing to one hub is for one Redis only.
local function publish_ready(channel, topic, k, now)
  if k <= 0 or channel == '' then return end
  if SHARDED_HINTS then
    publish_hint(channel, topic, k)
    return
  end
  local hubs = {}
  if not tk.sub then hubs = redis.call('ZRANGEBYSCORE', HUBS, now, '+inf') end
  if #hubs > 0 and redis.call('HLEN', tk.subs) > 0 then hubs = {} end
  local n, unheard = math.min(k, #hubs), 0
  local first = now % math.max(#hubs, 1)
  for i = 0, n - 1 do
    local share = math.floor(k / n) + (i < k % n and 1 or 0)
    local hub = hubs[(first + i) % #hubs + 1]
    if redis.call('PUBLISH', channel .. ':' .. hub, share .. ' ' .. topic) == 0 then
      redis.call('ZREM', HUBS, hub)
      unheard = unheard + share
    end
  end
  if n == 0 then unheard = k end
  if unheard > 0 then publish_hint(channel, topic, unheard) end
end

-- Publish "<k> <topic>" when this call made k messages ready.
local function publish_advanced(channel, topic, now)
  publish_ready(channel, topic, advanced.readied, now)
end
