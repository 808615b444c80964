--[[ Shared helpers, pasted into a script where it says `--@include message`.
  A message is a HASH at <msg_prefix><msgId> with short fields (they cost bytes per message),
  in this order (delayqueue/message.py MESSAGE_FIELDS; a test keeps the two equal):
    m body   p produceTime   t triggerTime   e expireTime
    r maxRetry   n deliveries so far (camellia's "retry")   s status (1..7)
    a attributes (JSON text; absent when none)   c receipt of the latest delivery
  Live statuses 1..3 sit in exactly one of waiting / ready / ack; ready and consuming ones
  are in the expiry index too. A dead letter (6, kept for redrive) is in the dead queue. ]]
--@include outcome

-- The message's fields in MESSAGE_FIELDS order, or nil when the hash is gone.
local function read_message(key)
  local v = redis.call('HMGET', key, 'm', 'p', 't', 'e', 'r', 'n', 's', 'a', 'c')
  if not v[7] then return nil end
  return v
end

-- Ended messages (4..7) keep their body for end_life_ms so getMsg and dedup can see them.
local function end_message(key, status, end_life_ms)
  redis.call('HSET', key, 's', status)
  redis.call('PEXPIRE', key, end_life_ms)
end

-- The topic's due time: the earliest time (ms) the scheduler must look at it, from the
-- heads of waiting, ack and the expiry index; false when all three are empty. O(log n).
local function due_at(waiting, ack, expire)
  local best = false
  for _, key in ipairs({waiting, ack, expire}) do
    local head = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
    if head[2] then
      local score = tonumber(head[2])
      if not best or score < best then best = score end
    end
  end
  return best
end

-- The due time after a write, if the write brought it forward (else -1): the caller lowers
-- the namespace due index to it.
local function lowered_due(before, waiting, ack, expire)
  local after = due_at(waiting, ack, expire)
  if after and (not before or after < before) then return after end
  return -1
end

-- A receipt given by the caller ('' = none) that is not the latest delivery's.
local function stale_receipt(m, receipt)
  return receipt ~= '' and m[9] ~= receipt
end

-- Why a request that changes a delivery (nack, changeVisibility) must be refused, or nil:
-- NO_MESSAGE unknown or ended; NOT_CONSUMING never delivered, or not consuming now;
-- STALE_RECEIPT a receipt of an earlier delivery. One order of checks for both scripts.
local function refuse_delivery_change(m, receipt)
  if not m or tonumber(m[7]) > 3 then return NO_MESSAGE end
  local status = tonumber(m[7])
  if status < 3 and tonumber(m[6]) == 0 then return NOT_CONSUMING end
  if stale_receipt(m, receipt) then return STALE_RECEIPT end
  if status ~= 3 then return NOT_CONSUMING end
  return nil
end
