--[[ Delete a live message: waiting / ready / consuming -> deleted (7), out of every queue.
  KEYS: the topic's 12 keys (includes/keys.lua).
  ARGV[1] msg_id  ARGV[2] now_ms  ARGV[3] end_life_ms  ARGV[4] release (1 = remove the body
  now)  ARGV[5] hint channel ('' = publish nothing)  ARGV[6] topic
  ARGV[7..] the server's default settings (includes/settings.lua): the topic's
  dedupWindowMillis keeps a deleted record at least that long. release=1 removes the record
  now all the same: the caller asked to forget the message, dedup window included.
  A deleted group front releases its group; a blocked message just leaves it.
  Returns: {outcome, fields, lowered_due}
    outcome  OK deleted (fields as of the delete);
             NO_MESSAGE no such live message (404); with release=1 a retained ended body
             (a dead letter too) is removed all the same
    lowered_due  the triggerTime of the group's next message put into waiting, else -1
  Memory: drains (first write ZREM): runs over maxmemory.
  Publishes "1 <topic>" when its group's next message became ready. ]]
--@include settings
--@include group
local msg_id, now, end_life, release = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]),
  ARGV[4] == '1'
local channel, topic = ARGV[5], ARGV[6]

local m = find_message(tk.msgs, msg_id)
if not m or not is_live(m[STATUS]) then
  if m and release then drop_message(tk.msgs, tk.ended, tk.dead, m.slot) end
  return {NO_MESSAGE, {}, -1}
end
if release then
  leave(m, now)
  drop_message(tk.msgs, tk.ended, tk.dead, m.slot)
  m[STATUS] = num(Status.DELETED)   -- the answer, as a saved record's field reads
else
  end_message(m, Status.DELETED, now, end_life, topic_settings(tk.config).dedupWindowMillis)
end
publish_advanced(channel, topic)
return {OK, m, advanced_due()}
