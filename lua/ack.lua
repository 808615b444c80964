--[[ Acknowledge a delivery: consuming (3) -> acked (4).
  A late ack of a message given back after an ack timeout or a nack (ready (2), or waiting
  (1) for a delayed redelivery, delivered before and not yet redelivered) is accepted too:
  it saves a duplicate delivery.
  KEYS[1] waiting  KEYS[2] ready  KEYS[3] ack  KEYS[4] expire  KEYS[5] dead  (zsets)
  KEYS[6] config   (unused; every topic script takes the same keys)
  KEYS[7] msgs     hash  slot -> record   KEYS[8] ended  zset  slot -> end of retention
  ARGV[1] msg_id  ARGV[2] now_ms  ARGV[3] end_life_ms  ARGV[4] receipt ('' = none: camellia's
  rules)
  Returns: {outcome, fields}
    outcome  OK acked; ACKED_LATE acked after it was given back; ALREADY_ACKED (with a
             receipt: only the one that acked it);
             NO_MESSAGE no such message, or it ended otherwise (404);
             NOT_DELIVERED waiting or ready and never delivered (400);
             STALE_RECEIPT the receipt is not the latest delivery's (409)
    fields   {m, p, t, e, r, n, s, a, c} after the ack, or {}
  Memory: drains (first write ZREM; the record keeps its size, its queue entry becomes an
  ended entry): runs over maxmemory. ]]
--@include message
local waiting, ready, ack, expire, msgs, ended =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[7], KEYS[8]
local msg_id, now, end_life, receipt = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4]

local m = retained(find_message(msgs, msg_id), ended, now)
if not m then return {NO_MESSAGE, {}} end
local status, deliveries = tonumber(m[7]), tonumber(m[6])
if status > 4 then return {NO_MESSAGE, m} end
if status < 3 and deliveries == 0 then return {NOT_DELIVERED, m} end
if stale_receipt(m, receipt) then return {STALE_RECEIPT, m} end
if status == 4 then return {ALREADY_ACKED, m} end

local place = ({waiting, ready, ack})[status]
redis.call('ZREM', place, m.slot)
redis.call('ZREM', expire, m.slot)
end_message(msgs, ended, m, 4, now, end_life)
return {status == 3 and OK or ACKED_LATE, m}
