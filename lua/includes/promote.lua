--[[ Shared: move due messages from waiting to ready.
  Moves at most `limit` slots whose triggerTime <= now; ZREM decides, so two schedulers (or a
  scheduler and a pull) racing never move one message twice. A promoted message enters the
  expiry index here: a waiting message cannot expire (expireTime = triggerTime + ttl), so the
  index holds only ready, consuming and blocked messages and a large waiting backlog costs no
  entry in it. Moved, and ready at its triggerTime, in acceptance order among equal times
  (queue_member).
  Blocked messages of a group are never in waiting: only its front is.
  Returns moved count and a flat list of promotion gaps (now - triggerTime, ms) for the
  readyQueueTimeGap histogram. ]]
--@include group
local function promote(now, limit)
  local due = redis.call('ZRANGEBYSCORE', tk.waiting, '-inf', now, 'WITHSCORES', 'LIMIT', 0, limit)
  local moved, gaps = 0, {}
  for i = 1, #due, 2 do
    local member, trigger = due[i], due[i + 1]
    if redis.call('ZREM', tk.waiting, member) == 1 then
      local m = load_slot(tk.msgs, member_slot(member))
      if m then
        to_ready(m, trigger)
        save_message(tk.msgs, m)
        moved = moved + 1
        gaps[#gaps + 1] = now - tonumber(trigger)
      end
    end
  end
  return moved, gaps
end
