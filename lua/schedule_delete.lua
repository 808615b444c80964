--[[ Delete a recurring schedule (deleteSchedule) and its waiting occurrence.
  KEYS: the 19 keys (includes/keys.lua), then KEYS[20] schedules (includes/schedule.lua),
  KEYS[21] schedule-ids (its ids, includes/schedule.lua).
  ARGV[1] now_ms  ARGV[2] scheduleId  ARGV[3] end_life_ms
  The waiting occurrence ends with status 7 (as deleteMsg) unless it is due already: a due
  or delivered occurrence was this fire time's and goes on.
  Returns: {outcome, dropped}
    outcome  OK deleted; NO_MESSAGE no such schedule: nothing written
    dropped  1 when its waiting occurrence was ended
  Memory: drains (first write ZREM or HDEL). ]]
--@include schedule
local schedules, ids = KEYS[20], KEYS[21]
local now, id, end_life = tonumber(ARGV[1]), ARGV[2], tonumber(ARGV[3])

local sch = load_schedule(schedules, id)
if not sch then return {NO_MESSAGE, 0} end
local dropped = drop_waiting(id, sch, now, end_life)
redis.call('HDEL', schedules, id)
redis.call('ZREM', ids, id)
due_lowered()   -- the dropped occurrence's retention (no caller copies it: a Cluster's sweep)
return {OK, dropped}
