--[[ Script outcomes: the same names and numbers as delayqueue/outcome.py (a test keeps the
  two equal). Positive: done; zero: a compare-and-set lost; negative: refused, nothing written. ]]
local OK = 1
local ACKED_LATE = 2
local ALREADY_ACKED = 3
local DUPLICATE = 4
local KEPT = 0
local NO_MESSAGE = -1
local NOT_DELIVERED = -2
local NOT_CONSUMING = -3
local BAD_ARGUMENT = -4
local STALE_RECEIPT = -5
local CONSUMING = -6
