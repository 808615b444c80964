--[[ Script outcomes: the same names and numbers as delayqueue/core/outcome.py (a test keeps the
  two equal). Positive: done; zero: a compare-and-set lost; negative: refused, nothing written. ]]
local OK = 1
local ACKED_LATE = 2
local ALREADY_ACKED = 3
local DUPLICATE = 4
local REPLACED = 5
local KEPT = 0
local NO_MESSAGE = -1
local NOT_DELIVERED = -2
local NOT_CONSUMING = -3
local BAD_ARGUMENT = -4
local STALE_RECEIPT = -5
local CONSUMING = -6
local BACKLOG = -7
local NOT_WRITTEN = -8
local NO_TOPIC = -9
local OTHER_GROUP = -10
local NO_SUBSCRIPTION = -11

-- The replies of a call that handles n entries each on its own: one(i) for i = 1..n, each
-- under pcall, so an entry whose Lua fails (a bug) answers that error in its place and the
-- entries before and after it stand, as if each had been its own script call. The error
-- pcall catches is its text, for a failed redis.call too (Redis 6.2 and 7 hand pcall the
-- string; fakeredis a value whose tostring is it).
local function each_on_its_own(n, one)
  local replies = {}
  for i = 1, n do
    local ok, reply = pcall(one, i)
    if not ok then reply = {err = tostring(reply)} end
    replies[i] = reply
  end
  return replies
end
