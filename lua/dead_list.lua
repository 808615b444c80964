--[[ Read a page of the topic's dead letters, oldest death first. Read only.
  KEYS: the 19 keys (includes/keys.lua); only dead, config and msgs are read.
  ARGV[1] now_ms  ARGV[2] limit (<= 1000)
  ARGV[3] cursor death time (ms, '' = from the start)  ARGV[4] cursor slot
  ARGV[5..15] the server's default settings
  The cursor is the last entry of the previous page; if it left the queue meanwhile, the
  page starts after its place (entries with the same death time are ordered by slot).
  Entries past the retention, or whose record is gone, are skipped.
  Returns: {entries, next_time, next_slot}: entries {msgId, deathTime, m, p, t, e, r, n, s, a,
  c}; next_time / next_slot the cursor of the next page, or -1 / '' at the end. ]]
--@include settings
--@include keys
--@include message
local dead, config, msgs = tk.dead, tk.config, tk.msgs
local now, limit = tonumber(ARGV[1]), tonumber(ARGV[2])
local cursor_time, cursor_slot = tonumber(ARGV[3]), ARGV[4]
local TIE_SCAN = 1000   -- most entries sharing the cursor's death time skipped after it left

local s = topic_settings(config, tk.topic_config)
local oldest = now - s.deadLetterRetentionMillis
local start = redis.call('ZCOUNT', dead, '-inf', '(' .. oldest)
local skip_ties = false
if cursor_time then
  local rank = redis.call('ZRANK', dead, cursor_slot)
  local score = rank and tonumber(redis.call('ZSCORE', dead, cursor_slot))
  if rank and score == cursor_time then
    start = math.max(start, rank + 1)
  else
    start = math.max(start, redis.call('ZCOUNT', dead, '-inf', '(' .. cursor_time))
    skip_ties = true
  end
end

local fetched = redis.call('ZRANGE', dead, start, start + limit + (skip_ties and TIE_SCAN or 0),
  'WITHSCORES')
local entries, last_time, last_slot, more = {}, -1, '', false
for i = 1, #fetched, 2 do
  local slot, score = fetched[i], tonumber(fetched[i + 1])
  if not (skip_ties and score == cursor_time and slot <= cursor_slot) then
    if #entries == limit then more = true break end
    last_time, last_slot = score, slot
    local m = load_slot(msgs, slot)
    if m and tonumber(m[STATUS]) == Status.RETRY_EXHAUSTED then
      table.insert(m, 1, score)
      table.insert(m, 1, m.id)
      entries[#entries + 1] = m
    end
  end
end
if not more and start + #fetched / 2 < redis.call('ZCARD', dead) then more = true end
if not more then last_time, last_slot = -1, '' end
return {entries, last_time, last_slot}
