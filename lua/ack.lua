--[[ Acknowledge a delivery: consuming (3) -> acked (4).
  A late ack of a message that timed out back to ready (2, delivered before, not yet
  redelivered) is accepted too: it saves a duplicate delivery.
  KEYS[1] waiting  zset  (unused; every topic script takes the same keys)
  KEYS[2] ready    zset
  KEYS[3] ack      zset
  KEYS[4] expire   zset
  KEYS[5] msg      hash  the message
  ARGV[1] msg_id  ARGV[2] end_life_ms
  Returns: {outcome, fields}
    outcome  OK acked; ACKED_LATE acked, was ready after an ack timeout; ALREADY_ACKED;
             NO_MESSAGE no such message, or it ended otherwise (404);
             NOT_DELIVERED waiting, or ready and never delivered (400)
    fields   {m, p, t, e, r, n, s} after the ack, or {}
  Memory: drains (first write ZREM): runs over maxmemory. ]]
--@include message
local ready, ack, expire, msg = KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local msg_id, end_life = ARGV[1], tonumber(ARGV[2])

local m = read_message(msg)
if not m then return {NO_MESSAGE, {}} end
local status, deliveries = tonumber(m[7]), tonumber(m[6])
if status == 4 then return {ALREADY_ACKED, m} end
if status == 1 or (status == 2 and deliveries == 0) then return {NOT_DELIVERED, m} end
if status ~= 2 and status ~= 3 then return {NO_MESSAGE, m} end

redis.call('ZREM', status == 3 and ack or ready, msg_id)
redis.call('ZREM', expire, msg_id)
end_message(msg, 4, end_life)
m[7] = '4'
return {status == 3 and OK or ACKED_LATE, m}
