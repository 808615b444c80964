--[[ Message statuses, camellia's numbers: the same names and numbers as
  delayqueue/core/status.py (a test keeps the two equal). Live ones (WAITING .. CONSUMING)
  sit in exactly one of the queues waiting / ready / ack; ended ones (ACKED .. DELETED) keep
  their record until their retention ends. A table, not locals: the outcome CONSUMING (a
  refusal, -6) and the status CONSUMING (3) would shadow each other. ]]
local Status = {WAITING = 1, READY = 2, CONSUMING = 3, ACKED = 4, EXPIRED = 5,
  RETRY_EXHAUSTED = 6, DELETED = 7}

-- Whether a status (a number, or a record field's string) is live (status.py Status.live).
local function is_live(status)
  return tonumber(status) <= Status.CONSUMING
end
