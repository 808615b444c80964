--[[ Pause or resume a recurring schedule (pauseSchedule / resumeSchedule).
  KEYS: the 19 keys (includes/keys.lua), then KEYS[20] schedules (includes/schedule.lua).
  ARGV[1] now_ms  ARGV[2] hint channel  ARGV[3] topic  ARGV[4] scheduleId  ARGV[5] end_life_ms
  ARGV[6] paused (1 pause / 0 resume)  ARGV[7] expected gen (resume: the plan was made from it;
  pause: ignored)  ARGV[8] cursor  ARGV[9] pending (-1: none)  ARGV[10] n, then n (fireTime,
  triggerTime) pairs: resume's plan (plan_start from now, after the cursor); then the server's
  default settings (includes/settings.lua)
  Pause ends the waiting occurrence (status 7, as deleteMsg) unless it is due already, and
  takes it out of sentCount (never delivered, it used none of the limit); resume
  writes the first fire time from now: those that passed during the pause are skipped by it,
  never counted as missed. Either bumps the generation.
  Returns: {outcome, gen, changed, written, lowered_due}
    outcome      OK; KEPT (resume) the gen is not the expected one: plan again; NO_MESSAGE no
                 such schedule: nothing written
    gen          the generation now
    changed      1 when the pause state changed, 0 when it already was so
    written      occurrences written (resume)
    lowered_due  the topic's new due time if the occurrence brought it forward, else -1
  Memory: grows Redis on resume (a record); pause drains.
  Publishes "<k> <topic>" when a resumed occurrence is ready at once. ]]
--@include schedule
local schedules = KEYS[20]
local now, channel, topic, id = tonumber(ARGV[1]), ARGV[2], ARGV[3], ARGV[4]
local end_life, pause, gen = tonumber(ARGV[5]), ARGV[6] == '1', tonumber(ARGV[7])

local sch = load_schedule(schedules, id)
if not sch then return {NO_MESSAGE, 0, 0, 0, -1} end
if (sch.paused and true or false) == pause then return {OK, sch.gen, 0, 0, -1} end
if pause then
  uncount_pending(id, sch, now, drop_waiting(id, sch, now, end_life))
  sch.paused, sch.pending, sch.gen = true, cjson.null, sch.gen + 1
  save_schedule(schedules, id, sch)
  return {OK, sch.gen, 1, 0, -1}
end
if sch.gen ~= gen then return {KEPT, sch.gen, 0, 0, -1} end
local s = topic_settings(tk.config, tk.topic_config)
local written, lowest = write_planned(id, sch, 10, now, s)
sch.paused, sch.gen = false, sch.gen + 1
apply_plan(sch, tonumber(ARGV[8]), tonumber(ARGV[9]), 0, -1, written)
save_schedule(schedules, id, sch)
publish_advanced(channel, topic, now)
return {OK, sch.gen, 1, written, due_lowered()}
