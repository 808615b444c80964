--[[ Read one message (getMsg). Read only.
  KEYS: the 19 keys (includes/keys.lua); msgs, ended, ack and dead are read.
  ARGV[1] msg_id  ARGV[2] now_ms ('' = also an ended message past its retention, not yet
  purged: for tests and tools)
  Returns: {m, p, t, e, r, n, s, a, c, g, slot, ack_deadline, dead_time, held}, or {} when there is
  no such message (live, or ended and still retained); slot: where its record is, for tests
  and tools; ack_deadline: while consuming (3), when its delivery times out, else -1;
  dead_time: for a dead letter (in the dead queue), when it died, else -1. A due message
  blocked behind its group's head shows status 2 (with now_ms given). held (in the default
  subscription only; else empty): name, status, retry of each named subscription that holds
  the message, flat. In a named subscription: its delivery state (a message it does not hold
  is no message). ]]
--@include fanout
local now = tonumber(ARGV[2])

local m = find_message(tk.msgs, ARGV[1])
if now then m = retained(m, tk.ended, now) end
if not m then return {} end
shown_status(m, now)
local status = tonumber(m[STATUS])
local deadline = status == Status.CONSUMING and redis.call('ZSCORE', tk.ack, m.slot)
local dead = status == Status.RETRY_EXHAUSTED and redis.call('ZSCORE', tk.dead, m.slot)
-- In the default subscription: where each named subscription holding the message has it.
local held = {}
if not tk.sub and held_by_subscriptions(m.slot) then
  in_each_subscription(function(name)
    local d = delivery_of(m)
    if d then
      shown_status(d, now)
      held[#held + 1] = name
      held[#held + 1] = tonumber(d[STATUS])
      held[#held + 1] = tonumber(d[DELIVERIES])
    end
  end)
end
m[#m + 1] = m.slot   -- after the last field
m[#m + 1] = deadline and tonumber(deadline) or -1
m[#m + 1] = dead and tonumber(dead) or -1
m[#m + 1] = held
return m
