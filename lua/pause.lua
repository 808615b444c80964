--[[ Pause or resume a topic (pauseTopic / resumeTopic): while paused, pulls and long polls
  hand nothing out (pull.lua), while sends, promotion, ack timeouts and expiry go on. The
  pause is the field `paused` of the topic's config hash (read with the settings, kept by a
  settings reset).
  KEYS: the 19 keys (includes/keys.lua); config is written, the others read.
  ARGV[1] paused (1 pause / 0 resume)  ARGV[2] known (1: the caller knows the topic exists,
  as its registry says)  ARGV[3] hint channel  ARGV[4] topic
  Returns: {outcome, changed, ready}
    outcome  OK; NO_TOPIC (nothing written) when the topic is not known to the caller and
             holds no record, no sequence and no settings: a call never creates a topic
    changed  1 when the pause state changed, 0 when it already was so
    ready    the ready messages now; on resume they are announced on the hint channel
             ("<ready> <topic>"), so long polls held meanwhile take them at once
  Memory: grows Redis by one hash field at most (first write HSET or HDEL). ]]
--@include keys
--@include outcome
local pause, known, channel, topic = ARGV[1] == '1', ARGV[2] == '1', ARGV[3], ARGV[4]

if not known and redis.call('EXISTS', tk.msgs, tk.seq, tk.config) == 0 then
  return {NO_TOPIC, 0, 0}
end
local changed
if pause then
  changed = redis.call('HSET', tk.config, 'paused', '1')
else
  changed = redis.call('HDEL', tk.config, 'paused')
end
local ready = redis.call('ZCARD', tk.ready)
if not pause and changed == 1 and ready > 0 and channel ~= '' then
  publish_hint(channel, topic, ready)
end
return {OK, changed, ready}
