--[[ Acknowledge deliveries, each on its own: consuming (3) -> acked (4).
  One call takes one ack or many (ackMsg is one; ackMsgBatch sends runs of acks in calls of
  up to 100).
  A late ack of a message given back after an ack timeout or a nack (ready (2), or waiting
  (1) for a delayed redelivery, delivered before and not yet redelivered) is accepted too:
  it saves a duplicate delivery.
  KEYS[1] waiting  KEYS[2] ready  KEYS[3] ack  KEYS[4] expire  KEYS[5] dead  (zsets)
  KEYS[6] config   (unused; every topic script takes the same keys)
  KEYS[7] msgs     hash  slot -> record   KEYS[8] ended  zset  slot -> end of retention
  ARGV[1] now_ms  ARGV[2] end_life_ms  ARGV[3] n, the number of acks
  then n times: msg_id, receipt ('' = none: camellia's rules)
  Returns one reply per ack, in order: {outcome, fields} (or, for an ack whose own writes
  failed in Lua, that error reply in its place; the others stand)
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
local now, end_life, n = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local queue_of = {[Status.WAITING] = waiting, [Status.READY] = ready, [Status.CONSUMING] = ack}

local function ack_one(msg_id, receipt)
  local m = retained(find_message(msgs, msg_id), ended, now)
  if not m then return {NO_MESSAGE, {}} end
  local status, deliveries = tonumber(m[STATUS]), tonumber(m[DELIVERIES])
  if status > Status.ACKED then return {NO_MESSAGE, m} end
  if status < Status.CONSUMING and deliveries == 0 then return {NOT_DELIVERED, m} end
  if stale_receipt(m, receipt) then return {STALE_RECEIPT, m} end
  if status == Status.ACKED then return {ALREADY_ACKED, m} end

  redis.call('ZREM', queue_of[status], m.slot)
  redis.call('ZREM', expire, m.slot)
  end_message(msgs, ended, m, Status.ACKED, now, end_life)
  return {status == Status.CONSUMING and OK or ACKED_LATE, m}
end

return each_on_its_own(n, function(i) return ack_one(ARGV[2 + 2 * i], ARGV[3 + 2 * i]) end)
