--[[ Create or replace a recurring schedule (createSchedule) and write its first occurrence.
  KEYS: the 19 keys (includes/keys.lua), then KEYS[20] schedules (hash scheduleId ->
  JSON: includes/schedule.lua), KEYS[21] schedule-ids (zset, scores 0: the hash's ids, for
  listSchedules' pages by ZRANGEBYLEX).
  ARGV[1] now_ms  ARGV[2] hint channel  ARGV[3] topic  ARGV[4] scheduleId  ARGV[5] end_life_ms
  ARGV[6] the definition (JSON object: core/schedules.py)
  ARGV[7] cursor  ARGV[8] pending (-1: none, finished at once)  ARGV[9] n, then n
  (fireTime, triggerTime) pairs: plan_start's occurrences; then the server's default
  settings (includes/settings.lua)
  A schedule with this id is replaced: its waiting occurrence is ended (status 7, as
  deleteMsg) and its generation bumped, so an advance planned from it writes nothing; its
  counts start again.
  Returns: {outcome, gen, written, replaced, lowered_due}
    outcome      OK
    gen          the schedule's generation now
    written      occurrences written (the first one; 0 when it was finished at once)
    replaced     1 when a schedule with this id was replaced
    lowered_due  the topic's new due time if the occurrence brought it forward, else -1
  Memory: grows Redis (a hash field, its id, a record). A create's first write is the occurrence's
  INCR (deny-oom): over maxmemory it is refused before anything is written. A replace ends
  the old waiting occurrence first (removals, allowed when full), and Redis then lets the
  script finish.
  Publishes "<k> <topic>" when the occurrence is ready at once. ]]
--@include schedule
local schedules, ids = KEYS[20], KEYS[21]
local now, channel, topic, id = tonumber(ARGV[1]), ARGV[2], ARGV[3], ARGV[4]
local end_life = tonumber(ARGV[5])
local sch = cjson.decode(ARGV[6])
local cursor, pending = tonumber(ARGV[7]), tonumber(ARGV[8])

local s = topic_settings(tk.config, tk.topic_config)
local old = load_schedule(schedules, id)
local gen, replaced = 1, 0
if old then
  drop_waiting(id, old, now, end_life)
  gen, replaced = (schedule_value(old.gen) or 0) + 1, 1
end
sch.gen, sch.paused, sch.sentCount, sch.missedCount = gen, false, 0, 0
sch.lastFireTime = cjson.null
local written, lowest = write_planned(id, sch, 9, now, s)
apply_plan(sch, cursor, pending, 0, -1, written)
save_schedule(schedules, id, sch)
redis.call('ZADD', ids, 0, id)
publish_advanced(channel, topic, now)
return {OK, gen, written, replaced, due_lowered()}
