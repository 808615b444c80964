--[[ Recurring schedules: a schedule's record and its occurrences, for lua/schedule_*.lua.
  A topic's schedules are one HASH (TopicKeys.schedules, KEYS[20] of the schedule scripts;
  their ids also a ZSET of scores 0, TopicKeys.schedule_ids, the 14th key of schedule_put and
  schedule_delete, which keep the two equal, for listSchedules' pages by ZRANGEBYLEX):
  scheduleId -> JSON (cjson), the definition Python wrote (core/schedules.py: topic, cron,
  timezone, everyMillis, msg, attributes as JSON text or null, groupId, ttlMillis, maxRetry,
  startTime, endTime, limit, misfire, createdTime) and the state only these scripts change:
    gen           bumped by every replace, pause and resume: an advance planned before it is
                  refused (compare-and-set with the cursor)
    cursor        the last fire time accounted for (written or missed), -1 before the first
    pending       the fire time of the occurrence left waiting, null when none (paused or
                  finished)
    paused        true while paused
    sentCount     occurrences delivered or still to be: written, less those a pause ended
                  before any delivery (uncount_pending)
    missedCount, lastFireTime (null until a fire time has come)
  An occurrence is an ordinary message with msgId "<scheduleId>:<fireTime>" (deterministic: a
  write repeated is the live message already there, never a second one), written by accept()
  as sendMsg writes a message, without sendMsg's backlog check. ]]
--@include settings
--@include accept
--@include fanout

local function schedule_value(x)
  if x == cjson.null then return nil end
  return x
end

local function load_schedule(schedules, id)
  local text = redis.call('HGET', schedules, id)
  if not text then return nil end
  return cjson.decode(text)
end

local function save_schedule(schedules, id, sch)
  redis.call('HSET', schedules, id, cjson.encode(sch))
end

local function occurrence_id(id, fire)
  return id .. ':' .. string.format('%d', fire)
end

-- Whether an occurrence may be written: no record has its msgId, or the one there ended
-- without ever being delivered (deleted, purged or expired while waiting). A live one is the
-- occurrence itself (a write repeated); a delivered one was this fire time's, and is kept.
local function may_write(m)
  if not m then return true end
  return not is_live(m[STATUS]) and tonumber(m[DELIVERIES]) == 0 and
    not held_by_subscriptions(m.slot)
end

-- Write the occurrence of `fire`, due at `trigger`, from the schedule's definition (ttl and
-- maxRetry: the schedule's, else the topic's settings `s` now). Returns whether it was
-- written and the entry that counts for the topic's due time.
local function write_occurrence(id, sch, fire, trigger, now, s)
  local msg_id = occurrence_id(id, fire)
  local existing, slot = find_message(tk.msgs, msg_id)
  if not may_write(existing) then return false, nil end
  local ttl = schedule_value(sch.ttlMillis) or s.ttlMillis
  local max_retry = schedule_value(sch.maxRetry)
  if max_retry == nil then max_retry = s.maxRetry end
  local _, entry = accept(now, msg_id, slot, existing, sch.msg,
    schedule_value(sch.attributes) or false, trigger, ttl, max_retry,
    schedule_value(sch.groupId) or false, {own_retry = schedule_value(sch.maxRetry) ~= nil,
      fan = redis.call('HLEN', tk.subs) > 0, detached = s.defaultSubscription == 0})
  return true, entry
end

-- End the schedule's waiting occurrence (status 7, as deleteMsg), if it still waits and was
-- never delivered: one that is due, or being delivered, is this fire time's and goes on.
local function drop_waiting(id, sch, now, end_life)
  local pending = schedule_value(sch.pending)
  if not pending then return 0 end
  local m = find_message(tk.msgs, occurrence_id(id, pending))
  if not m or tonumber(m[STATUS]) ~= Status.WAITING or tonumber(m[DELIVERIES]) ~= 0
      or tonumber(m[TRIGGER_TIME]) <= now then
    return 0
  end
  end_everywhere(m, Status.DELETED, now, end_life)
  return 1
end

-- Take the pending occurrence out of sentCount when a pause leaves it never to be delivered:
-- the pause just ended it (`dropped`), or its fire time is still ahead and no live or
-- delivered record holds it (deleted or purged while waiting). sentCount then holds only the
-- occurrences delivered or still to be: a resume that writes this fire time again counts it
-- again, and the limit loses nothing to the pause. Returns 1 when uncounted.
local function uncount_pending(id, sch, now, dropped)
  local pending = schedule_value(sch.pending)
  if not pending then return 0 end
  if dropped ~= 1 and not (pending > now
      and may_write(find_message(tk.msgs, occurrence_id(id, pending)))) then
    return 0
  end
  sch.sentCount = math.max((schedule_value(sch.sentCount) or 0) - 1, 0)
  return 1
end

-- Write a plan's occurrences, from ARGV[first]: the count n, then n (fireTime, triggerTime)
-- pairs. Returns how many were written and the lowest due-time entry among them (or false).
local function write_planned(id, sch, first, now, s)
  local n = tonumber(ARGV[first])
  local written, lowest = 0, false
  for i = 1, n do
    local fire = tonumber(ARGV[first + 2 * i - 1])
    local trigger = tonumber(ARGV[first + 2 * i])
    local wrote, entry = write_occurrence(id, sch, fire, trigger, now, s)
    if wrote then
      written = written + 1
      if not lowest or entry < lowest then lowest = entry end
    end
  end
  return written, lowest
end

-- A plan's new state: cursor (-1 none), pending (-1: none, the schedule is finished), the
-- fire times it missed and the latest fire time that has come (-1: none).
local function apply_plan(sch, cursor, pending, missed, last_fire, written)
  sch.cursor = cursor
  sch.pending = pending >= 0 and pending or cjson.null
  sch.sentCount = (schedule_value(sch.sentCount) or 0) + written
  sch.missedCount = (schedule_value(sch.missedCount) or 0) + missed
  if last_fire >= 0 then sch.lastFireTime = last_fire end
end
