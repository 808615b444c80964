--[[ Delete a live message: waiting / ready / consuming -> deleted (7), out of every queue.
  KEYS[1] waiting  KEYS[2] ready  KEYS[3] ack  KEYS[4] expire  KEYS[5] dead  (zsets)
  KEYS[6] config   (unused; every topic script takes the same keys)
  KEYS[7] msgs     hash  slot -> record   KEYS[8] ended  zset  slot -> end of retention
  ARGV[1] msg_id  ARGV[2] now_ms  ARGV[3] end_life_ms  ARGV[4] release (1 = remove the body
  now)
  Returns: {outcome, fields}
    outcome  OK deleted (fields as of the delete);
             NO_MESSAGE no such live message (404); with release=1 a retained ended body
             (a dead letter too) is removed all the same
  Memory: drains (first write ZREM): runs over maxmemory. ]]
--@include message
local waiting, ready, ack, expire, dead, msgs, ended =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[7], KEYS[8]
local msg_id, now, end_life, release = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]),
  ARGV[4] == '1'

local m = find_message(msgs, msg_id)
if not m or not is_live(m[STATUS]) then
  if m and release then drop_message(msgs, ended, dead, m.slot) end
  return {NO_MESSAGE, {}}
end
for _, key in ipairs({waiting, ready, ack, expire}) do
  redis.call('ZREM', key, m.slot)
end
if release then
  drop_message(msgs, ended, dead, m.slot)
  m[STATUS] = num(Status.DELETED)   -- a string, as a saved record's fields are
else
  end_message(msgs, ended, m, Status.DELETED, now, end_life)
end
return {OK, m}
