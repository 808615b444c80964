--[[ Read one message (getMsg). Read only.
  KEYS: the topic's 12 keys (includes/keys.lua); only msgs and ended are read.
  ARGV[1] msg_id  ARGV[2] now_ms ('' = also an ended message past its retention, not yet
  purged: for tests and tools)
  Returns: {m, p, t, e, r, n, s, a, c, g, slot}, or {} when there is no such message (live, or
  ended and still retained); slot: where its record is, for tests and tools. A due message
  blocked behind its group's head shows status 2 (with now_ms given). ]]
--@include group
local now = tonumber(ARGV[2])

local m = find_message(tk.msgs, ARGV[1])
if now then m = retained(m, tk.ended, now) end
if not m then return {} end
shown_status(m, now)
m[#m + 1] = m.slot   -- after the last field
return m
