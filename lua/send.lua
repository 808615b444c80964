--[[ Accept messages, each on its own: -> waiting (1), or -> ready (2) when already due, or,
  for a grouped message behind its group's front, blocked (includes/group.lua).
  One call takes one message or many (sendMsg is a batch of one, sendMsgBatch sends its
  entries in calls of up to 100, or an atomic batch in one call): the keys, the time and the
  settings are passed once.
  KEYS: the 19 keys (includes/keys.lua); config is read only.
  ARGV[1] now_ms  ARGV[2] hint channel  ARGV[3] topic  ARGV[4] n, the number of messages
  ARGV[5] atomic (1: every message is written or none, see below; 0: each on its own)
  then n times 8 ARGV, one message each:
    msg_id, body, trigger_ms (>= now_ms; -1: now + the topic's delayMillis), ttl_ms (-1: the
    topic's), max_retry (-1: the topic's; for a replace, the replaced message's), attributes
    (JSON text, '' = none), group ('' = none), replace (1: onDuplicate=replace, 0: keep)
  then the server's default settings (includes/settings.lua)
  Each accepted message takes the topic's next acceptance sequence, in entry order: equal
  trigger times are handed out in that order.
  Returns one reply per message, in order: {outcome, fields, lowered_due}
    outcome      OK accepted; DUPLICATE a live message (1..3) has this id and replace is 0,
                 or an ended (4..7) one ended less than the topic's dedupWindowMillis ago
                 (replace or not): nothing written, its stored fields returned. An ended one
                 outside the window is replaced by an ordinary send. A message of the same
                 call counts: the second of two equal msgIds is a DUPLICATE (with replace 0).
                 REPLACED (replace 1) a waiting or ready (or group-blocked) namesake begins
                 again in its slot: new body, attributes, triggerTime, expireTime (and
                 maxRetry if given), retry 0, no receipt (an earlier one is stale), a new
                 acceptance sequence: it queues, in its group too, as a new send would.
                 CONSUMING (replace 1) the namesake is being consumed (status 3): refused,
                 nothing written, its fields returned. OTHER_GROUP (replace 1) the replace
                 gives another groupId (or none where it had one, or one where it had none):
                 refused, nothing written, its fields returned.
                 NO_SUBSCRIPTION refused, nothing written: the topic has
                 defaultSubscription=false and no named subscription (nobody would receive it).
                 A message a named subscription holds counts as live (DUPLICATE; a replace
                 of it is CONSUMING: its delivery there has begun).
                 BACKLOG refused, nothing written: the topic already holds maxBacklog live
                 messages (every message of waiting and of the expiry index: ready, consuming
                 and blocked ones; a DUPLICATE or REPLACED adds none). NOT_WRITTEN (atomic
                 only) refused
                 because another message of the call was.
    fields       {m, p, t, e, r, n, s, a, c, g} of the message now stored ({} if refused)
    lowered_due  the topic's new due time if this call brought it forward (the same in
                 every reply of the call), else -1
  or, for a message whose own writes failed (a Lua error: a bug), that error reply in its
  place; the other messages stand, as if each had been its own call.
  Atomic: every check (duplicates, replaces, the backlog) runs for the whole call before its
  first write, so a refusal (BACKLOG, CONSUMING, OTHER_GROUP; a DUPLICATE is none) writes
  nothing; then every message is written (no pcall: a Lua error,
  a bug, fails the whole call).
  Memory: grows Redis (one record, one zset entry per message), so the first write is INCRBY
  of the sequence (the call's accepts take theirs in one: includes/accept.lua), a deny-oom command: over maxmemory Redis refuses the whole call (OOM) before anything is
  written, and once a call has written it is not stopped halfway. Keep it first.
  Publishes "<k> <topic>" on the hint channel once, when k > 0 messages are ready at once
  (held long polls wake k waiters). ]]
--@include settings
--@include accept
--@include fanout
local now, channel, topic, n = tonumber(ARGV[1]), ARGV[2], ARGV[3], tonumber(ARGV[4])
local atomic = ARGV[5] == '1'
local FIRST, ENTRY = 6, 8

local s = topic_settings(tk.config, tk.topic_config)
-- Named subscriptions receive through the fan-out; without the default subscription
-- (defaultSubscription=false) only they do, and a send nobody would receive is refused.
local fan = redis.call('HLEN', tk.subs) > 0
local detached = s.defaultSubscription == 0
-- The topic's live messages, counted once when it has a backlog limit, then kept up to date.
local live = s.maxBacklog > 0 and
  redis.call('ZCARD', tk.waiting) + redis.call('ZCARD', tk.expire) +
  (detached and redis.call('ZCARD', tk.fanout) + redis.call('ZCARD', tk.sexpire) or 0) or 0

local function entry_at(i)
  return FIRST + (i - 1) * ENTRY
end

-- Whether the entry at `at` asks for onDuplicate=replace, and its groupId ('' = none).
local function replacing(at)
  return ARGV[at + 7] == '1', ARGV[at + 6]
end

-- The verdict of a replace of `existing`, a live namesake: OTHER_GROUP (another groupId),
-- CONSUMING (status 3) or REPLACED (it begins again).
local function replace_verdict(existing, group)
  if (existing[GROUP] or '') ~= group then return OTHER_GROUP end
  if tonumber(existing[STATUS]) == Status.CONSUMING then return CONSUMING end
  -- handed to named subscriptions: its delivery there has begun
  if held_by_subscriptions(existing.slot) then return CONSUMING end
  return REPLACED
end

-- What the message at `at` meets before any write: DUPLICATE (a live namesake and no
-- replace, or an ended one inside the dedup window), REPLACED / CONSUMING / OTHER_GROUP (a
-- replace of a live namesake), BACKLOG (the topic is full) or nil (a new message); then the
-- message with its msgId (live, or ended), and the slot it takes.
local function check(at)
  local existing, slot = find_message(tk.msgs, ARGV[at])
  local replace, group = replacing(at)
  local verdict = nil
  if detached and not fan then
    verdict = NO_SUBSCRIPTION
  elseif existing and (is_live(existing[STATUS]) or held_by_subscriptions(existing.slot)) then
    verdict = replace and replace_verdict(existing, group) or DUPLICATE
  elseif existing and in_dedup_window(existing, now, s.dedupWindowMillis)
      and retained(existing, tk.ended, now) then
    verdict = DUPLICATE
  elseif s.maxBacklog > 0 and live >= s.maxBacklog then verdict = BACKLOG end
  return verdict, existing, slot
end

-- Verdicts that refuse the entry (nothing written; in an atomic call, nothing at all).
local REFUSING = {[BACKLOG] = true, [CONSUMING] = true, [OTHER_GROUP] = true,
  [NO_SUBSCRIPTION] = true}

local function send_one(at)
  local msg_id, body = ARGV[at], ARGV[at + 1]
  local trigger, ttl, max_retry = tonumber(ARGV[at + 2]), tonumber(ARGV[at + 3]),
    tonumber(ARGV[at + 4])
  local attributes, group = ARGV[at + 5], ARGV[at + 6]
  local verdict, existing, slot = check(at)
  if verdict == DUPLICATE then return {DUPLICATE, shown_status(existing, now), -1} end
  if verdict == BACKLOG then return {BACKLOG, {}, -1} end
  if REFUSING[verdict] then return {verdict, existing and shown_status(existing, now) or {}, -1} end
  local replaced = verdict == REPLACED
  if not replaced then live = live + 1 end
  if trigger < 0 then trigger = now + s.delayMillis end
  if ttl < 0 then ttl = s.ttlMillis end
  local own_retry = max_retry >= 0 or (replaced and existing.own_retry) or false
  if max_retry < 0 then max_retry = replaced and tonumber(existing[MAX_RETRY]) or s.maxRetry end
  -- accept's first write is the deny-oom INCRBY of the sequence (see Memory above)
  local m = accept(now, msg_id, slot, existing, body,
    attributes ~= '' and attributes or false, trigger, ttl, max_retry,
    group ~= '' and group or false, {own_retry = own_retry, fan = fan, detached = detached})
  return {replaced and REPLACED or OK, shown_status(m, now), -1}
end

-- Atomic: refused entries answer their refusal, the others NOT_WRITTEN, when any is refused.
-- The checks count the call's own messages: a msgId an earlier entry writes is live (waiting,
-- ready or blocked, never consuming) in that entry's group when a later one meets it, so the
-- later one is a DUPLICATE, or with replace a REPLACED or OTHER_GROUP; each new message takes
-- one place of the backlog.
local function refusals()
  local written, verdicts, refused = {}, {}, false   -- written: msgId -> its groupId
  for i = 1, n do
    local at = entry_at(i)
    local id = ARGV[at]
    local replace, group = replacing(at)
    local verdict
    if written[id] then
      verdict = not replace and DUPLICATE or (written[id] == group and REPLACED or OTHER_GROUP)
    else
      verdict = check(at)
    end
    if REFUSING[verdict] then
      verdicts[i], refused = verdict, true
    else
      verdicts[i] = NOT_WRITTEN
      if verdict == nil then live = live + 1 end
      if verdict == nil or verdict == REPLACED then written[id] = group end
    end
  end
  if not refused then return nil end
  local replies = {}
  for i = 1, n do replies[i] = {verdicts[i], {}, -1} end
  return replies
end

local replies
reserve_seqs(n)
if atomic then
  local counted = live
  replies = refusals()
  if replies then return replies end
  live = counted
  replies = {}
  for i = 1, n do replies[i] = send_one(entry_at(i)) end
else
  replies = each_on_its_own(n, function(i) return send_one(entry_at(i)) end)
end
release_seqs()
-- Messages due at once reach the named subscriptions in this same call.
if fan then fan_out(now, n) end
publish_advanced(channel, topic, now)
return with_due_lowered(replies)
