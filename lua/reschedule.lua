--[[ Move a waiting (1) or ready (2) message to a new triggerTime: waiting again, or ready
  (at the tail of the queue) when due now; its expireTime moves with it (the same ttl).
  KEYS[1] waiting  KEYS[2] ready  KEYS[3] ack  KEYS[4] expire  (zsets)
  KEYS[5] dead     KEYS[6] config  (unused; every topic script takes the same keys)
  KEYS[7] msgs     hash  slot -> record   KEYS[8] ended  zset  (read only, for the due time)
  ARGV[1] msg_id  ARGV[2] now_ms  ARGV[3] trigger_ms (a past one means now)
  ARGV[4] hint channel  ARGV[5] topic
  Returns: {outcome, fields, lowered_due}
    outcome  OK; CONSUMING being consumed (400); NO_MESSAGE unknown or ended (404)
  Memory: first write ZREM: runs over maxmemory (it moves, never adds, a message).
  Publishes "1 <topic>" when the message is ready. ]]
--@include message
local waiting, ready, ack, expire, msgs, ended =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[7], KEYS[8]
local msg_id, now, trigger = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local channel, topic = ARGV[4], ARGV[5]

local m = find_message(msgs, msg_id)
if not m then return {NO_MESSAGE, {}, -1} end
local status = tonumber(m[STATUS])
if status == Status.CONSUMING then return {CONSUMING, m, -1} end
if not is_live(status) then return {NO_MESSAGE, m, -1} end

local before = due_at(waiting, ack, expire, ended)
if trigger < now then trigger = now end
local expire_at = trigger + tonumber(m[EXPIRE_TIME]) - tonumber(m[TRIGGER_TIME])
redis.call('ZREM', status == Status.WAITING and waiting or ready, m.slot)
if trigger <= now then
  redis.call('ZADD', ready, now, m.slot)
  redis.call('ZADD', expire, expire_at, m.slot)
  m[STATUS] = Status.READY
  redis.call('PUBLISH', channel, '1 ' .. topic)
else
  redis.call('ZREM', expire, m.slot)
  redis.call('ZADD', waiting, trigger, m.slot)
  m[STATUS] = Status.WAITING
end
m[TRIGGER_TIME], m[EXPIRE_TIME] = trigger, expire_at
save_message(msgs, m)
return {OK, m, lowered_due(before, waiting, ack, expire, ended)}
