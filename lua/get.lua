--[[ Read one message (getMsg). Read only.
  KEYS[1] waiting  KEYS[2] ready  KEYS[3] ack  KEYS[4] expire  KEYS[5] dead  (zsets)
  KEYS[6] config   hash
  KEYS[7] msgs     hash  slot -> record   KEYS[8] ended  (only msgs is read)
  ARGV[1] msg_id  ARGV[2] now_ms ('' = also an ended message past its retention, not yet
  purged: for tests and tools)
  Returns: {m, p, t, e, r, n, s, a, c, slot}, or {} when there is no such message (live, or
  ended and still retained); slot: where its record is, for tests and tools. ]]
--@include message
local msgs, ended = KEYS[7], KEYS[8]
local now = tonumber(ARGV[2])

local m = find_message(msgs, ARGV[1])
if now then m = retained(m, ended, now) end
if not m then return {} end
m[#m + 1] = m.slot   -- after the last field
return m
