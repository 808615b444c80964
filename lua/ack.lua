--[[ Acknowledge a delivery: consuming (3) -> acked (4).
  A late ack of a message that timed out back to ready (2, delivered before, not yet
  redelivered) is accepted too: it saves a duplicate delivery.
  KEYS[1] ready    zset
  KEYS[2] ack      zset
  KEYS[3] expire   zset
  KEYS[4] msg      hash  the message
  ARGV[1] msg_id  ARGV[2] end_life_ms
  Returns: {outcome, fields}
    outcome  1 acked   2 acked late (was ready after an ack timeout)   3 already acked
            -1 no such message, or it ended otherwise (404)
            -2 not delivered yet (waiting, or ready and never delivered) (400)
    fields   {m, p, t, e, r, n, s} after the ack, or {} ]]
--@include message
local ready, ack, expire, msg = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local msg_id, end_life = ARGV[1], tonumber(ARGV[2])

local m = read_message(msg)
if not m then return {-1, {}} end
local status, deliveries = tonumber(m[7]), tonumber(m[6])
if status == 4 then return {3, m} end
if status == 1 or (status == 2 and deliveries == 0) then return {-2, m} end
if status ~= 2 and status ~= 3 then return {-1, m} end

redis.call('ZREM', status == 3 and ack or ready, msg_id)
redis.call('ZREM', expire, msg_id)
end_message(msg, 4, end_life)
m[7] = '4'
return {status == 3 and 1 or 2, m}
