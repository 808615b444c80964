--[[ Delete a live message: waiting / ready / consuming -> deleted (7), out of every queue.
  KEYS[1] waiting  KEYS[2] ready  KEYS[3] ack  KEYS[4] expire  KEYS[5] dead  (zsets)
  KEYS[6] config   (unused; every topic script takes the same keys)
  KEYS[7] msg      hash  the message
  ARGV[1] msg_id  ARGV[2] end_life_ms  ARGV[3] release (1 = remove the body now)
  Returns: {outcome, fields}
    outcome  OK deleted (fields as of the delete);
             NO_MESSAGE no such live message (404); with release=1 a retained ended body
             (a dead letter too) is removed all the same
  Memory: drains (first write ZREM or DEL): runs over maxmemory. ]]
--@include message
local waiting, ready, ack, expire, dead, msg = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[7]
local msg_id, end_life, release = ARGV[1], tonumber(ARGV[2]), ARGV[3] == '1'

local m = read_message(msg)
if not m or tonumber(m[7]) > 3 then
  if m and release then
    redis.call('DEL', msg)
    redis.call('ZREM', dead, msg_id)
  end
  return {NO_MESSAGE, {}}
end
for _, key in ipairs({waiting, ready, ack, expire}) do
  redis.call('ZREM', key, msg_id)
end
if release then
  redis.call('DEL', msg)
else
  end_message(msg, 7, end_life)
end
m[7] = '7'
return {OK, m}
