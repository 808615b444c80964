--[[ Named subscriptions: handing each message to every subscription that must receive it,
  and the work a topic-wide call does in each of them.
  A message accepted while the topic has named subscriptions gets one entry in tk.fanout
  (seq..slot -> triggerTime). When it is due, fan_out hands it to every named subscription
  created before it was accepted (its creation sequence lower than the message's), in one
  script: an ungrouped message becomes a bare entry of the subscription's ready queue (no
  record there until its first delivery in that subscription: includes/message.lua
  fresh_delivery) and the topic's sexpire index gets one entry for its expiry; a grouped one
  gets a record and joins its group in that subscription (includes/group.lua). tk.refs
  counts, per message, the subscriptions that keep an entry of it (live or retained), so its
  body (the topic's record) is freed only once every one has let go (unref). The default
  subscription is the topic's own keys: promotion there is promote(). ]]
--@include group

local subscription_list = nil

-- The named subscriptions: {{name, creation seq}, ...}, read once per call.
local function subscriptions()
  if not subscription_list then
    subscription_list = {}
    local flat = redis.call('HGETALL', tk.subs)
    for i = 1, #flat, 2 do
      local seq = tonumber(string.match(flat[i + 1], '^(%d+)'))
      subscription_list[#subscription_list + 1] = {flat[i], seq}
    end
  end
  return subscription_list
end

-- Run fn(name) in the context of every named subscription, then come back to the call's own.
local function in_each_subscription(fn)
  for _, sub in ipairs(subscriptions()) do
    use_context(context_keys(sub[1]))
    fn(sub[1], sub[2])
  end
  use_context(CALL_CONTEXT)
end

-- Hand at most `limit` due messages of tk.fanout to the named subscriptions. Returns how many
-- messages were handed out, and the earliest expireTime it put into a subscription's expiry
-- index (a grouped message's), false when none: the topic's due time may come sooner.
local function fan_out(now, limit)
  local due = redis.call('ZRANGEBYSCORE', tk.fanout, '-inf', now, 'WITHSCORES', 'LIMIT', 0, limit)
  local moved, soonest = 0, false
  for i = 1, #due, 2 do
    local member, trigger = due[i], due[i + 1]
    if redis.call('ZREM', tk.fanout, member) == 1 then
      local slot = member_slot(member)
      local tm = load_slot(tk.bodies, slot)
      if tm and tm.seq == tonumber(string.sub(member, 1, 12), 16) then
        local count = 0
        in_each_subscription(function(_, created)
          if tm.seq <= created then return end
          count = count + 1
          if not tm[GROUP] then
            redis.call('ZADD', tk.ready, trigger, member)
            advanced.readied = advanced.readied + 1
            return
          end
          local m = fresh_delivery(tm, trigger)
          if join_group(m) then place(m, now, trigger) end
          save_message(tk.msgs, m)
          local e = tonumber(m[EXPIRE_TIME])
          if not soonest or e < soonest then soonest = e end
        end)
        if count > 0 then
          redis.call('HINCRBY', tk.refs, slot, count)
          if not tm[GROUP] then zadd_due(tk.sexpire, tm[EXPIRE_TIME], slot) end
        elseif tm.detached then
          redis.call('HDEL', tk.bodies, slot)   -- no subscription takes it: nothing holds it
        end
        moved = moved + 1
      end
    end
  end
  return moved, soonest
end

-- The delivery state of the message at `slot` in the current context when it is live there
-- (its record, or a bare ready entry), else nil. tm: the topic's record.
-- Whether the current (named) subscription holds tm, the topic's record, as a bare ready
-- entry (no record of it there, its member in ready): the entry's score, when it became due
-- there; else false.
local function bare_entry(tm)
  return redis.call('HEXISTS', tk.msgs, tm.slot) == 0 and
    redis.call('ZSCORE', tk.ready, queue_member(tm))
end

-- The current subscription's delivery state of tm: its record, or a bare entry's first one
-- (fresh_delivery); nil when it does not hold the message.
local function delivery_of(tm)
  local m = load_slot(tk.msgs, tm.slot)
  if m then return m end
  local due = tk.sub and redis.call('ZSCORE', tk.ready, queue_member(tm))
  if due then return fresh_delivery(tm, due) end
  return nil
end

local function live_delivery(tm)
  local m = delivery_of(tm)
  return m and is_live(m[STATUS]) and m or nil
end

-- End tm (the topic's record) with `status` in every subscription where it lives, the default
-- one included, and take it off the fan-out (deleteMsg, purgeTopic). Returns whether it was
-- live anywhere.
local function end_everywhere(tm, status, now, retention, window)
  local ended = false
  if redis.call('ZREM', tk.fanout, queue_member(tm)) == 1 then ended = true end
  if tm.detached then
    if is_live(tm[STATUS]) then
      tm[STATUS], tm.ended_at = status, now
      save_message(tk.bodies, tm)
      zadd_due(tk.ended, now + math.max(retention, window or 0), tm.slot,
        PURGE_SLACK_MS)
      ended = true
    end
  elseif is_live(tm[STATUS]) then
    end_message(tm, status, now, retention, window)
    ended = true
  end
  if held_by_subscriptions(tm.slot) then
    redis.call('ZREM', tk.sexpire, tm.slot)
    in_each_subscription(function()
      local m = live_delivery(tm)
      if m then
        end_message(m, status, now, retention, window)
        ended = true
      end
    end)
  end
  return ended
end

-- The earliest time the scheduler must look at the topic: its own due time, the fan-out's
-- and the bare entries' expiry heads, and every named subscription's due time; false when
-- none. O(subscriptions): the scheduler's scripts only.
local function topic_due()
  local best = due_at(tk.waiting, tk.ack, tk.expire, tk.ended)
  local function lower(t) if t and (not best or t < best) then best = t end end
  in_each_subscription(function()
    lower(due_at(tk.waiting, tk.ack, tk.expire, tk.ended))
  end)
  return best
end

-- Remove every record of tm (an ended message) now, in every subscription and the topic's
-- (deleteMsg release=1: forget the message, dedup window included).
local function release_everywhere(tm)
  if held_by_subscriptions(tm.slot) then
    in_each_subscription(function()
      redis.call('ZREM', tk.ended, tm.slot)
      redis.call('ZREM', tk.dead, tm.slot)
      redis.call('HDEL', tk.msgs, tm.slot)
    end)
    redis.call('HDEL', tk.refs, tm.slot)
    redis.call('ZREM', tk.sexpire, tm.slot)
  end
  drop_message(tk.bodies, tk.ended, tk.dead, tm.slot)
end
