--[[ The message record, pasted into a script where it says `--@include message`.
  Every message of a topic is one field of the topic's `msgs` HASH: slot -> record. This file
  owns the slot lookup, the record's encoding and every write of a record. A decoded message
  m is a list of the fields in MESSAGE_FIELDS order (delayqueue/core/message.py; a test keeps
  the two equal), read and written by name, m[TRIGGER_TIME] (the index constants below),
  plus m.id (the msgId, read from the record), m.slot, m.dt (time of the latest delivery),
  m.seq (the acceptance sequence: the topic's order of sends, 0 for a record written before
  it existed), m.blocked (true while it waits behind its group's head: includes/group.lua)
  and m.ended_at (when an ended message ended, for the dedup window; nil when live, or ended
  under storage format records-2, which kept no end time).
  A script replies with m as it is: the fields are its reply, in that order.
  Slot: the first SLOT_HEX hex chars of sha1(msgId); when that slot holds another msgId's
  record, "=" .. msgId. Every zset of the topic (waiting, ready, ack, expire, dead, ended)
  holds slots, never msgIds (`waiting` and `ready` prefix each with its sequence:
  includes/group.lua).
  A lookup reads the digest slot, then (on a miss or another id)
  "=" .. msgId: two msgIds never share a record.
  Record: struct '>BBI3I3I6I6I6' status, flags (bit0 attributes, bit1 delivered, bit2 seq,
  bit3 group, bit4 blocked, bit5 end time), maxRetry, deliveries, produceTime, triggerTime, expireTime
  (26 bytes); msgId ('>H' length + bytes); attributes ('>H' length + JSON) if flagged; the
  latest delivery time ('>I6') if flagged (the receipt is '%x.%x' of it and the deliveries);
  the acceptance sequence ('>I6') if flagged; the groupId ('>H' length + bytes) if flagged;
  the time it ended ('>I6') if flagged (written only for an ended status: a redriven dead
  letter drops it); then the body to the end. Records of storage format records-1 have no
  sequence (bits 2..4 unset) and read as sequence 0; records-2 ones have no end time (bit 5,
  storage format records-3: an older node would read those 6 bytes as the body's start).
  Live statuses 1..3 sit in exactly one of waiting / ready / ack, or (blocked behind their
  group's head, stored as status 1) in the group structures; ready, consuming and blocked
  ones are in the expiry index too. Ended ones (4..7) are in `ended`, scored by the end of their
  retention; a dead letter (6, kept for redrive) is in the dead queue too. ]]
--@include outcome
--@include status
local SLOT_HEX = 14          -- digest chars of a slot (scripts.py can lower it for a test)
local PURGE_SLACK_MS = 60000 -- ended records wait this much past their retention, so a busy
                             -- topic's purge runs in batches, not once per ended message
-- The due time this call's writes call for: the lowest score it wrote to a set the
-- scheduler reads the topic's due time from (waiting, ack, expire, fanout, sexpire; ended
-- plus PURGE_SLACK_MS), false when none. Entries removed can only make the due time later:
-- a due index left lower costs the scheduler one early visit, never a late one.
local written_due = false

local function note_due(score)
  score = tonumber(score)
  if not written_due or score < written_due then written_due = score end
end

-- ZADD one entry to a set the due time is read from (`slack`: PURGE_SLACK_MS for ended).
local function zadd_due(key, score, member, slack)
  redis.call('ZADD', key, score, member)
  note_due(tonumber(score) + (slack or 0))
end

local HEADER = '>BBI3I3I6I6I6'
local HAS_ATTRIBUTES, DELIVERED, HAS_SEQ, HAS_GROUP, BLOCKED, HAS_END = 1, 2, 4, 8, 16, 32
-- Storage format records-4: OWN_RETRY the send gave maxRetry (a named subscription's own
-- setting does not override it); DETACHED the default subscription does not hold the
-- message (defaultSubscription=false): the record is only the body of the named
-- subscriptions' deliveries, status 1 while any of them holds it.
local OWN_RETRY, DETACHED = 64, 128

-- The index of each field of a decoded message, with its MESSAGE_FIELDS letter.
local BODY = 1           -- m  the body
local PRODUCE_TIME = 2   -- p  produceTime
local TRIGGER_TIME = 3   -- t  triggerTime
local EXPIRE_TIME = 4    -- e  expireTime
local MAX_RETRY = 5      -- r  maxRetry
local DELIVERIES = 6     -- n  deliveries so far (camellia's "retry")
local STATUS = 7         -- s  status (includes/status.lua)
local ATTRIBUTES = 8     -- a  attributes (JSON text; false when none)
local RECEIPT = 9        -- c  receipt of the latest delivery (false: none)
local GROUP = 10         -- g  groupId (false: none)

local function digest_slot(id)
  return string.sub(redis.sha1hex(id), 1, SLOT_HEX)
end

local function flagged(flags, bit)
  return math.floor(flags / bit) % 2 == 1
end

local function num(x)
  return string.format('%.0f', tonumber(x))
end

-- The fields of a record, with m.id, m.slot, m.dt.
local function decode(record, slot)
  local status, flags, max_retry, deliveries, produce, trigger, expire, pos =
    struct.unpack(HEADER, record)
  local len
  len, pos = struct.unpack('>H', record, pos)
  local id = string.sub(record, pos, pos + len - 1)
  pos = pos + len
  local attributes, delivered_at = false, nil
  if flags % 2 == HAS_ATTRIBUTES then
    len, pos = struct.unpack('>H', record, pos)
    attributes = string.sub(record, pos, pos + len - 1)
    pos = pos + len
  end
  local receipt = false
  if flagged(flags, DELIVERED) then
    delivered_at, pos = struct.unpack('>I6', record, pos)
    receipt = string.format('%x.%x', delivered_at, deliveries)
  end
  local seq, group, m_own_retry, m_detached = 0, false, false, false
  if flagged(flags, HAS_SEQ) then seq, pos = struct.unpack('>I6', record, pos) end
  if flagged(flags, HAS_GROUP) then
    len, pos = struct.unpack('>H', record, pos)
    group = string.sub(record, pos, pos + len - 1)
    pos = pos + len
  end
  local ended_at = nil
  if flagged(flags, HAS_END) then ended_at, pos = struct.unpack('>I6', record, pos) end
  m_own_retry, m_detached = flagged(flags, OWN_RETRY), flagged(flags, DETACHED)
  local m = {string.sub(record, pos), num(produce), num(trigger), num(expire), num(max_retry),
    num(deliveries), tostring(status), attributes, receipt, group}   -- BODY .. GROUP
  m.id, m.slot, m.dt, m.seq, m.blocked = id, slot, delivered_at, seq, flagged(flags, BLOCKED)
  m.ended_at, m.own_retry, m.detached = ended_at, m_own_retry, m_detached
  return m
end

-- The record of m; `bare` (a named subscription's record): its delivery state only, the
-- body and attributes being the topic's record's.
local function encode(m, bare)
  -- The end time only while ended: a message that lives again (a redrive) drops it.
  local ended_at = not is_live(m[STATUS]) and m.ended_at or nil
  local attributes = not bare and m[ATTRIBUTES]
  local flags = 0
  if attributes then flags = flags + HAS_ATTRIBUTES end
  if m.dt then flags = flags + DELIVERED end
  if m.seq and m.seq > 0 then flags = flags + HAS_SEQ end
  if m[GROUP] then flags = flags + HAS_GROUP end
  if m.blocked then flags = flags + BLOCKED end
  if ended_at then flags = flags + HAS_END end
  if m.own_retry and not bare then flags = flags + OWN_RETRY end
  if m.detached and not bare then flags = flags + DETACHED end
  local parts = {struct.pack(HEADER, tonumber(m[STATUS]), flags, tonumber(m[MAX_RETRY]),
      tonumber(m[DELIVERIES]), tonumber(m[PRODUCE_TIME]), tonumber(m[TRIGGER_TIME]),
      tonumber(m[EXPIRE_TIME])),
    struct.pack('>H', #m.id), m.id}
  if attributes then
    parts[#parts + 1] = struct.pack('>H', #attributes)
    parts[#parts + 1] = attributes
  end
  if m.dt then parts[#parts + 1] = struct.pack('>I6', m.dt) end
  if m.seq and m.seq > 0 then parts[#parts + 1] = struct.pack('>I6', m.seq) end
  if m[GROUP] then
    parts[#parts + 1] = struct.pack('>H', #m[GROUP])
    parts[#parts + 1] = m[GROUP]
  end
  if ended_at then parts[#parts + 1] = struct.pack('>I6', ended_at) end
  parts[#parts + 1] = bare and '' or m[BODY]
  return table.concat(parts)
end

-- The status of a stored record without decoding it: the header's first byte.
local function stored_status(record)
  return string.byte(record, 1)
end

-- A named subscription's receipts end with ".<6 hex digits of sha1(its name)>", so that a
-- receipt of one subscription is never another's (the default's have no tag).
local function receipt_tag()
  return '.' .. string.sub(redis.sha1hex(tk.sub), 1, 6)
end

-- The record at a slot (from a zset), or nil. A named subscription's record takes its body
-- and attributes from the topic's (an empty body if that is gone: a release).
local function load_slot(msgs, slot)
  local record = redis.call('HGET', msgs, slot)
  if not record then return nil end
  local m = decode(record, slot)
  if msgs ~= tk.bodies then
    if m[RECEIPT] then m[RECEIPT] = m[RECEIPT] .. receipt_tag() end
    local body = redis.call('HGET', tk.bodies, slot)
    if body then
      local tm = decode(body, slot)
      m[BODY], m[ATTRIBUTES], m.own_retry = tm[BODY], tm[ATTRIBUTES], tm.own_retry
    end
  end
  return m
end

-- A named subscription's first delivery state of tm, a topic record: ready, never delivered,
-- no receipt; its maxRetry the message's own, else the subscription's own setting, else the
-- one resolved at send (the topic's, else the server's); its triggerTime `trigger`, the time
-- it became due there (its bare entry's score), when given: the topic's record shows the
-- default subscription's, which a nack with a delay moves. Not saved: a message ready in a
-- subscription and never delivered there is a bare entry of its ready queue (fan_out).
local function fresh_delivery(tm, trigger)
  local m = {}
  for i = BODY, GROUP do m[i] = tm[i] end
  if trigger then m[TRIGGER_TIME] = num(trigger) end
  m.id, m.slot, m.seq, m.own_retry, m.fresh = tm.id, tm.slot, tm.seq, tm.own_retry, true
  m[STATUS], m[DELIVERIES], m[RECEIPT] = num(Status.READY), '0', false
  if not tm.own_retry then
    local own = redis.call('HGET', tk.config, 'maxRetry')
    if own then m[MAX_RETRY] = num(own) end
  end
  return m
end

-- The message at a slot of the context's ready queue (`score`: its entry's score there): its
-- record, or in a named subscription a bare entry's first delivery state (fresh_delivery).
local function load_ready(slot, score)
  local m = load_slot(tk.msgs, slot)
  if m or not tk.sub then return m end
  local tm = load_slot(tk.bodies, slot)
  return tm and fresh_delivery(tm, score)
end

local find_delivery   -- (below: it reads the topic's record with find_message)

-- The message with this msgId, or nil: its digest slot, else its "=" slot, both read in one
-- HMGET (a send of a new msgId, the common case, misses both). Second value: its slot, or
-- the one a new message with this msgId takes (the digest slot when free).
local function find_message(msgs, id)
  if msgs ~= tk.bodies then return find_delivery(id) end
  local digest, own_slot = digest_slot(id), '=' .. id
  local records = redis.call('HMGET', msgs, digest, own_slot)
  local m = records[1] and decode(records[1], digest)
  if m and m.id == id then return m, digest end
  local own = records[2] and decode(records[2], own_slot)
  if own and own.id == id then return own, own_slot end
  return nil, m and own_slot or digest
end

-- In a named subscription: the delivery state of the message with this msgId (its record, or
-- a bare ready entry's fresh_delivery), or nil when the subscription does not hold it; second
-- value: the topic's slot for it.
find_delivery = function(id)
  local tm, slot = find_message(tk.bodies, id)
  if not tm then return nil, slot end
  local m = load_slot(tk.msgs, slot)
  if m then return m, slot end
  local due = redis.call('ZSCORE', tk.ready, string.format('%012x', tm.seq) .. slot)
  if due then return fresh_delivery(tm, due), slot end
  return nil, slot
end

-- m, or nil when it is an ended message whose retention has passed (its record waits for the
-- scheduler's purge, but it is gone for every request, as if already purged).
local function retained(m, ended, now)
  if not m or is_live(m[STATUS]) then return m end
  local retention_end = redis.call('ZSCORE', ended, m.slot)
  if retention_end and tonumber(retention_end) <= now then return nil end
  return m
end

-- Whether m, an ended message, is within the topic's dedup window at `now`: a re-send of its
-- msgId is then a duplicate of it. A record that kept no end time (records-2) never is.
local function in_dedup_window(m, now, window)
  return m.ended_at ~= nil and window > 0 and now < m.ended_at + window
end

-- Store m (at m.slot): every write of a record goes through here. Numbers are kept as the
-- strings scripts reply with: a field still a string is one decode (or num) wrote, already
-- in that form; only the fields the call set to numbers are formatted.
local function save_message(msgs, m)
  for i = PRODUCE_TIME, STATUS do   -- the numeric fields
    if type(m[i]) ~= 'string' then m[i] = num(m[i]) end
  end
  m[RECEIPT] = m.dt and string.format('%x.%x', m.dt, tonumber(m[DELIVERIES])) or false
  if m[RECEIPT] and msgs ~= tk.bodies then m[RECEIPT] = m[RECEIPT] .. receipt_tag() end
  m.fresh = nil
  redis.call('HSET', msgs, m.slot, encode(m, msgs ~= tk.bodies))
end

-- A named subscription let go of its last entry of the message at `slot` (its record was
-- purged or dropped, or the subscription deleted): when none holds it any more, the topic's
-- record goes too unless the default subscription still holds or retains it; a detached
-- one ends, kept for the topic's own dedupWindowMillis.
local function unref(slot, now)
  if redis.call('HINCRBY', tk.refs, slot, -1) > 0 then return end
  redis.call('HDEL', tk.refs, slot)
  local record = redis.call('HGET', tk.bodies, slot)
  if not record then return end
  local topic_ended = TOPIC_BASE .. ':ended'
  local tm = decode(record, slot)
  if tm.detached then
    local window = tonumber(redis.call('HGET', tk.topic_config, 'dedupWindowMillis') or '0')
    if window > 0 and now then
      tm[STATUS], tm.ended_at = Status.ACKED, now
      save_message(tk.bodies, tm)
      zadd_due(topic_ended, now + window, slot, PURGE_SLACK_MS)
    else
      redis.call('HDEL', tk.bodies, slot)
    end
  elseif not is_live(tm[STATUS]) and not redis.call('ZSCORE', topic_ended, slot) then
    redis.call('HDEL', tk.bodies, slot)
  end
end

-- Whether a named subscription still holds an entry of the message at `slot`.
local function held_by_subscriptions(slot)
  return redis.call('HEXISTS', tk.refs, slot) == 1
end

-- Remove a record for good, and its retention entries.
local function drop_message(msgs, ended, dead, slot, now)
  redis.call('ZREM', ended, slot)
  redis.call('ZREM', dead, slot)
  if msgs ~= tk.bodies then
    if redis.call('HDEL', msgs, slot) == 1 then unref(slot, now) end
  elseif not held_by_subscriptions(slot) then
    redis.call('HDEL', msgs, slot)
  end
end

-- Purge at most `limit` records whose retention ended by `now` (a dead letter leaves the
-- dead queue too). Returns how many were purged.
local function purge_ended(msgs, ended, dead, now, limit)
  local due = redis.call('ZRANGEBYSCORE', ended, '-inf', now, 'LIMIT', 0, limit)
  for _, slot in ipairs(due) do
    redis.call('ZREM', ended, slot)
    local record = redis.call('HGET', msgs, slot)
    if record and not is_live(stored_status(record)) then   -- never a live message
      drop_message(msgs, ended, dead, slot, now)
    end
  end
  return #due
end

-- The topic's due time: the earliest time (ms) the scheduler must look at it, from the
-- heads of waiting, ack and the expiry index, and of ended (plus PURGE_SLACK_MS), and for the
-- topic's own context of its fan-out and sexpire (includes/fanout.lua); false when all are
-- empty. O(log n).
local function due_at(waiting, ack, expire, ended)
  local best = false
  local keys = {waiting, ack, expire, ended}
  -- The topic's own: also the fan-out and the named subscriptions' bare entries' expiry.
  if not tk.sub then keys[5], keys[6] = tk.fanout, tk.sexpire end
  for _, key in ipairs(keys) do
    local head = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
    if head[2] then
      local score = tonumber(head[2])
      if key == ended then score = score + PURGE_SLACK_MS end
      if not best or score < best then best = score end
    end
  end
  return best
end

-- Lower the topic's due time to what this call wrote (note_due), when that is earlier than
-- the due time on record; returns the new due time, else -1. No set head is read: on one
-- Redis the record is the namespace due index itself (KEYS[19]), lowered here; on a Cluster
-- (the index lives in another slot) it is the topic's own due record, and the caller lowers
-- the index to the returned time (ZADD LT). Either way the index is at most the record, and
-- the record at most every score a call wrote since the scheduler last set it (record_due).
-- On one Redis that is a single ZADD LT CH (it changed the entry: lowered, or added).
local function due_lowered()
  if not written_due then return -1 end
  if DUE_DIRECT then
    local changed = redis.call('ZADD', tk.due, 'LT', 'CH', written_due, DUE_TOPIC)
    return changed == 1 and written_due or -1
  end
  local current = redis.call('GET', tk.due)
  if current and tonumber(current) <= written_due then return -1 end
  redis.call('SET', tk.due, written_due)
  return written_due
end

-- A many-entry call's replies ({outcome, fields, lowered_due} each, or an error reply in
-- its place), the topic's due time lowered once for the whole call and carried by each.
local function with_due_lowered(replies)
  local lowered = due_lowered()
  if lowered >= 0 then
    for _, reply in ipairs(replies) do
      if reply[3] then reply[3] = lowered end
    end
  end
  return replies
end

-- The scheduler's visit computed the topic's exact due time (false: nothing live) and will
-- write it to the index (due_set.lua): on a Cluster the topic's due record follows it.
local function record_due(due)
  if not DUE_DIRECT then
    if due then redis.call('SET', tk.due, due) else redis.call('DEL', tk.due) end
  end
  return due
end

-- A receipt given by the caller ('' = none) that is not the latest delivery's.
local function stale_receipt(m, receipt)
  return receipt ~= '' and m[RECEIPT] ~= receipt
end

-- Why a request that changes a delivery (nack, changeVisibility) must be refused, or nil:
-- NO_MESSAGE unknown or ended; NOT_CONSUMING never delivered, or not consuming now;
-- STALE_RECEIPT a receipt of an earlier delivery. One order of checks for both scripts.
local function refuse_delivery_change(m, receipt)
  if not m or not is_live(m[STATUS]) then return NO_MESSAGE end
  local status = tonumber(m[STATUS])
  if status < Status.CONSUMING and tonumber(m[DELIVERIES]) == 0 then return NOT_CONSUMING end
  if stale_receipt(m, receipt) then return STALE_RECEIPT end
  if status ~= Status.CONSUMING then return NOT_CONSUMING end
  return nil
end
