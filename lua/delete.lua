--[[ Delete a live message: waiting / ready / consuming -> deleted (7), out of every queue, in
  the default subscription and in every named one that holds it (includes/fanout.lua).
  KEYS: the 19 keys (includes/keys.lua).
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
    lowered_due  the topic's new due time if this call brought it forward, else -1
  Memory: drains (first write ZREM): runs over maxmemory.
  Publishes "1 <topic>" when its group's next message became ready. ]]
--@include settings
--@include fanout
local msg_id, now, end_life, release = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]),
  ARGV[4] == '1'
local channel, topic = ARGV[5], ARGV[6]

local m = find_message(tk.msgs, msg_id)
if not m then return {NO_MESSAGE, {}, -1} end
local window = topic_settings(tk.config, tk.topic_config).dedupWindowMillis
local ended = end_everywhere(m, Status.DELETED, now, end_life, window)
if release then release_everywhere(m) end
if not ended then return {NO_MESSAGE, {}, -1} end
m[STATUS] = num(Status.DELETED)   -- the answer, as a saved record's field reads
publish_advanced(channel, topic, now)
return {OK, m, due_lowered()}
