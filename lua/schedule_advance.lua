--[[ Advance a recurring schedule (the schedules loop): write the occurrences planned after
  its cursor and move the cursor, as one compare-and-set; or, with no plan, repair it: write
  its waiting occurrence again when that was deleted or purged before its fire time.
  KEYS: the 19 keys (includes/keys.lua), then KEYS[20] schedules (includes/schedule.lua).
  ARGV[1] now_ms  ARGV[2] hint channel  ARGV[3] topic  ARGV[4] scheduleId
  ARGV[5] expected gen  ARGV[6] expected cursor (the plan was made from these)
  ARGV[7] new cursor (-1: a repair, no plan: the state stays)  ARGV[8] new pending (-1: none,
  the schedule is finished)  ARGV[9] missed (fire times not sent at their own time)
  ARGV[10] last fire time that has come (-1: none)  ARGV[11] n, then n (fireTime,
  triggerTime) pairs, in order; then the server's default settings (includes/settings.lua)
  An occurrence whose msgId is live, or was delivered, is not written again (includes/
  schedule.lua may_write): a retried advance writes nothing twice.
  Returns: {outcome, pending, written, paused, lowered_due}
    outcome      OK advanced (or repaired); KEPT the schedule's gen or cursor is not the
                 expected one (a replace, pause, resume or another advance came first):
                 nothing written, plan again from the state now; NO_MESSAGE no such schedule
                 (deleted): nothing written
    pending      the pending fire time now (-1: none: finished, paused or gone)
    written      occurrences written
    paused       1 when the schedule is paused
    lowered_due  the topic's new due time if an occurrence brought it forward, else -1
  Memory: grows Redis (records). Over maxmemory the first accept's INCR refuses the call
  before anything is written.
  Publishes "<k> <topic>" when k occurrences are ready at once (late ones). ]]
--@include schedule
local schedules = KEYS[20]
local now, channel, topic, id = tonumber(ARGV[1]), ARGV[2], ARGV[3], ARGV[4]
local gen, cursor = tonumber(ARGV[5]), tonumber(ARGV[6])
local new_cursor, new_pending = tonumber(ARGV[7]), tonumber(ARGV[8])
local missed, last_fire = tonumber(ARGV[9]), tonumber(ARGV[10])

local sch = load_schedule(schedules, id)
if not sch then return {NO_MESSAGE, -1, 0, 0, -1} end
local pending = schedule_value(sch.pending) or -1
local paused = sch.paused and 1 or 0
if sch.gen ~= gen or sch.cursor ~= cursor or sch.paused then
  return {KEPT, pending, 0, paused, -1}
end
local s = topic_settings(tk.config, tk.topic_config)
local written, lowest = 0, false
if new_cursor < 0 then
  -- A repair: the waiting occurrence, only before its fire time (never a due one again).
  if pending > now then
    local wrote, entry = write_occurrence(id, sch, pending, pending, now, s)
    if wrote then written, lowest = 1, entry end
  end
  if written == 0 then return {OK, pending, 0, 0, -1} end
else
  written, lowest = write_planned(id, sch, 11, now, s)
  apply_plan(sch, new_cursor, new_pending, missed, last_fire, written)
end
save_schedule(schedules, id, sch)
publish_advanced(channel, topic, now)
return {OK, schedule_value(sch.pending) or -1, written, 0, due_lowered()}
