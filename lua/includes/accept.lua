--[[ Accepting a new message: what sendMsg does for each message it writes, and what a
  schedule does for each occurrence it materialises (lua/schedule_*.lua), in one place.
  Its functions use the topic's keys by name (includes/keys.lua). ]]
--@include group

-- Sequences for a run of accepts (send.lua's entries): the first accept of the run takes
-- as many as the run may need in one INCRBY, not one INCR each; the run's end gives back
-- what it did not use (release_seqs), so the topic's sequence ends where one INCR per accept
-- leaves it and each message has the sequence it would have had. Outside a run (a schedule's
-- occurrence) each accept takes its own INCR. Either way the first write is that deny-oom
-- INCR / INCRBY (send.lua's Memory note).
local seq_run = {wanted = 0, next = 1, last = 0}

-- At most `count` accepts follow, until release_seqs.
local function reserve_seqs(count)
  seq_run.wanted = count
end

local function take_seq()
  if seq_run.next > seq_run.last then
    if seq_run.wanted <= 0 then return next_seq() end
    seq_run.last = redis.call('INCRBY', tk.seq, seq_run.wanted)
    seq_run.next, seq_run.wanted = seq_run.last - seq_run.wanted + 1, 0
  end
  local seq = seq_run.next
  seq_run.next = seq + 1
  return seq
end

local function release_seqs()
  local unused = seq_run.last - seq_run.next + 1
  if unused > 0 then redis.call('DECRBY', tk.seq, unused) end
  seq_run.wanted, seq_run.next, seq_run.last = 0, 1, 0
end

-- Write a new message with this msgId at `slot` (replacing `existing`, a record with this
-- msgId, when there is one): it takes the topic's next acceptance sequence (take_seq: the
-- INCR is its first write, see send.lua's Memory note), joins its group when it has one, and is placed
-- (waiting, ready or blocked) and saved. `attributes` and `group` are false when none.
-- `existing` ended: it is wholly replaced (out of `ended` and the dead queue). `existing`
-- live, waiting or ready or blocked (a replace, sendMsg onDuplicate=replace; the caller has
-- checked it is not consuming and has this group): it leaves its place first, and the new
-- delivery state queues as a new send would: behind the group's front when it was blocked,
-- and, when it was the front, the group's next message takes over if it now comes first.
-- Returns the message and the entry that counts for the topic's due time: its triggerTime
-- when it waits, else its expireTime.
-- `options`: own_retry (the send gave maxRetry), fan (the topic has named subscriptions: the
-- message enters tk.fanout too), detached (defaultSubscription=false: the default
-- subscription does not hold it; only the fan-out does).
local function accept(now, msg_id, slot, existing, body, attributes, trigger, ttl, max_retry,
    group, options)
  local seq = take_seq()
  local is_replace = existing and is_live(existing[STATUS])
  local was_front = is_replace and existing[GROUP] and
    redis.call('HGET', tk.groups, existing[GROUP]) == existing.slot
  local expire_at = trigger + ttl
  -- A whole new record, so a message with this id is wholly replaced (same slot): no
  -- deliveries, no receipt, no end time.
  local m = {id = msg_id, slot = slot, seq = seq, own_retry = options.own_retry}
  m[BODY], m[ATTRIBUTES] = body, attributes
  m[PRODUCE_TIME], m[TRIGGER_TIME], m[EXPIRE_TIME] = now, trigger, expire_at
  m[MAX_RETRY], m[DELIVERIES], m[STATUS] = max_retry, 0, Status.WAITING
  m[RECEIPT], m[GROUP] = false, group
  if is_replace then
    redis.call('ZREM', tk.fanout, queue_member(existing))
    -- its group's front stays named in tk.groups: settle_front decides
    if not existing.detached then unqueue(existing) end
  elseif existing then
    redis.call('ZREM', tk.ended, m.slot)
    redis.call('ZREM', tk.dead, m.slot)
  end
  if options.fan or options.detached then
    zadd_due(tk.fanout, trigger, queue_member(m))
  end
  if options.detached then
    m.detached = true
    if was_front and not existing.detached then release_group(m, now) end
    save_message(tk.msgs, m)
    return m, trigger
  end
  local entry = options.fan and trigger or expire_at
  local front
  if not m[GROUP] then front = true
  elseif was_front and not existing.detached then front = settle_front(m, now)
  else front = join_group(m) end
  if front then
    place(m, now, trigger)
    if m[STATUS] == Status.WAITING then entry = trigger end
  end
  save_message(tk.msgs, m)
  return m, entry
end
