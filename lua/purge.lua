--[[ Purge a topic (purgeTopic), one slice: every live message of this slice of the topic's
  records that was accepted at or before the cutoff ends with status 7 (deleted), wherever it
  sits, in every subscription (end_everywhere: a group front releases its group), kept end_life_ms like any deleted
  message. Records are visited with HSCAN of `msgs`, so a message that moves between the
  queues while the purge runs slice by slice is still found: HSCAN returns every field present
  from the first slice to the last at least once. A message accepted after the cutoff (a
  higher acceptance sequence) is left alone; ended records are skipped.
  KEYS: the 19 keys (includes/keys.lua).
  ARGV[1] now_ms  ARGV[2] end_life_ms  ARGV[3] cutoff (the last acceptance sequence to purge;
  -1: the topic's sequence now, for the first slice)  ARGV[4] HSCAN cursor ('0' to start)
  ARGV[5] HSCAN COUNT  ARGV[6] hint channel  ARGV[7] topic  ARGV[8] budget (most messages
  to end; the slice stops there and its cursor is not worth going on from: a purge that
  stops at its budget starts its next call from '0')  ARGV[9..] the server's default settings
  (includes/settings.lua: the topic's dedupWindowMillis keeps a purged record at least that
  long)
  Returns: {ended, next_cursor, cutoff, lowered_due, live}
    ended        messages ended by this slice
    next_cursor  the cursor of the next slice; '0' when every record has been visited
    cutoff       the cutoff used (pass it to the next slice)
    lowered_due  the topic's new due time if this slice brought it forward, else -1
    live         the topic's live messages after this slice
  Memory: drains or keeps (a record rewritten in place, an `ended` entry per message; the
  first write is ZREM). Publishes "<k> <topic>" when a group's next message became ready. ]]
--@include settings
--@include fanout
local now, end_life, cutoff = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local cursor, count, channel, topic = ARGV[4], tonumber(ARGV[5]), ARGV[6], ARGV[7]
local budget = tonumber(ARGV[8])
local window = topic_settings(tk.config, tk.topic_config).dedupWindowMillis

if cutoff < 0 then cutoff = tonumber(redis.call('GET', tk.seq) or '0') end
local page = redis.call('HSCAN', tk.msgs, cursor, 'COUNT', count)
local fields, ended = page[2], 0
for i = 1, #fields, 2 do
  if ended >= budget then break end
  local record = fields[i + 1]
  if is_live(stored_status(record)) or held_by_subscriptions(fields[i]) then
    -- Read again: an earlier entry of this page may have rewritten it (a group front's
    -- release makes the next message front); the page holds the record as it was.
    local m = load_slot(tk.msgs, fields[i])
    if m and m.seq <= cutoff and end_everywhere(m, Status.DELETED, now, end_life, window) then
      ended = ended + 1
    end
  end
end
publish_advanced(channel, topic, now)
local live = redis.call('ZCARD', tk.waiting) + redis.call('ZCARD', tk.expire) +
  redis.call('ZCARD', tk.fanout) + redis.call('ZCARD', tk.sexpire)
return {ended, page[1], cutoff,
  due_lowered(), live}
