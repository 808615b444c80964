--[[ Read a page of a topic's live messages (listMsg), in one queue's order. Read only.
  KEYS: the 19 keys (includes/keys.lua); waiting, ready, ack, blocked, msgs are read.
  ARGV[1] now_ms  ARGV[2] view: waiting (status 1, by triggerTime), ready (2, in delivery
  order), ack (3, by ack deadline), or blocked (behind their group's head, each group in its
  order, groups by groupId)  ARGV[3] limit (<= 1000)  ARGV[4] max_bytes (the bodies of one
  page; at least one entry is answered)  ARGV[5] cursor score ('' = from the start)
  ARGV[6] cursor member
  Every view is a total order: (score, member) of a zset, where the member of waiting and
  ready begins with the acceptance sequence (includes/group.lua), or the lex order of
  blocked. The cursor is the last entry of the previous page: a page starts right after its
  place, whether it is still there or not, so messages that stayed where they were are listed
  once and none is skipped; one that moved may be listed twice or not at all.
  Returns: {entries, next_score, next_member}: entries {msgId, score, member, m, p, t, e, r,
  n, s, a, c, g}, score its place in the view (triggerTime, ready time, ack deadline;
  blocked: its triggerTime), member its member there (score and member of an entry are the
  cursor of a page ending with it; blocked: score 0); next_score / next_member the next
  page's cursor, or -1 / '' at the end. ]]
--@include group
local now, view, limit = tonumber(ARGV[1]), ARGV[2], tonumber(ARGV[3])
local max_bytes, cursor_score, cursor_member = tonumber(ARGV[4]), tonumber(ARGV[5]), ARGV[6]
local KEY = {waiting = tk.waiting, ready = tk.ready, ack = tk.ack}

-- The rank right after the cursor (score, member) in `key`: its own rank + 1 while it is
-- there, else the first entry after its place, found by bisecting the entries of its score.
local function start_rank(key)
  if not cursor_score then return 0 end
  local score = redis.call('ZSCORE', key, cursor_member)
  if score and tonumber(score) == cursor_score then
    return redis.call('ZRANK', key, cursor_member) + 1
  end
  local lo = redis.call('ZCOUNT', key, '-inf', '(' .. cursor_score)
  local hi = redis.call('ZCOUNT', key, '-inf', cursor_score)
  while lo < hi do   -- the first rank of [lo, hi) whose member sorts after the cursor's
    local mid = math.floor((lo + hi) / 2)
    if redis.call('ZRANGE', key, mid, mid)[1] > cursor_member then hi = mid else lo = mid + 1 end
  end
  return lo
end

-- The view's next limit + 1 entries after the cursor: members and scores, flat.
local function next_entries()
  if view == 'blocked' then
    local from = cursor_score and ('(' .. cursor_member) or '-'
    local members = redis.call('ZRANGEBYLEX', tk.blocked, from, '+', 'LIMIT', 0, limit + 1)
    local flat = {}
    for _, member in ipairs(members) do
      flat[#flat + 1], flat[#flat + 2] = member, 0
    end
    return flat
  end
  local key = KEY[view]
  local start = start_rank(key)
  return redis.call('ZRANGE', key, start, start + limit, 'WITHSCORES')
end

local function slot_of(member)
  if view == 'blocked' then return blocked_slot(member) end
  if view == 'ack' then return member end
  return member_slot(member)
end

local flat = next_entries()
local entries, bytes, last, full = {}, 0, nil, false
for i = 1, #flat, 2 do
  if #entries >= limit or (#entries > 0 and bytes >= max_bytes) then
    full = true
    break
  end
  local member = flat[i]
  last = i
  -- a named subscription's ready queue holds bare entries too (includes/fanout.lua)
  local m = view == 'ready' and load_ready(slot_of(member), flat[i + 1])
    or load_slot(tk.msgs, slot_of(member))
  if m then
    local score = view == 'blocked' and m[TRIGGER_TIME] or flat[i + 1]
    shown_status(m, now)
    bytes = bytes + #m[BODY]
    table.insert(m, 1, m.id)
    table.insert(m, 2, score)
    table.insert(m, 3, member)
    entries[#entries + 1] = m
  end
end
-- More to come: this page stopped early, or it read limit + 1 entries (some had no record).
if full or #flat > 2 * limit then return {entries, flat[last + 1], flat[last]} end
return {entries, -1, ''}
