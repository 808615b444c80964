--[[ Set a topic's own settings (validated by the caller): reset drops every topic value
  first (not the topic's pause, which is state, not a setting: pause.lua); the given ones are
  then written. One script, so a reset and the new values land together.
  KEYS: the 18 keys (includes/keys.lua); only config is written.
  ARGV[1] reset (1 / 0)  ARGV[2..] setting, value pairs
  Returns: OK; BAD_ARGUMENT (nothing written) if ARGV[2..] is not pairs.
  Memory: grows Redis a little; its first write is DEL or HSET. ]]
--@include keys
--@include outcome
local config = tk.config
local reset = ARGV[1] == '1'

if (#ARGV - 1) % 2 ~= 0 then return BAD_ARGUMENT end
if reset then
  local paused = redis.call('HGET', config, 'paused')
  redis.call('DEL', config)
  if paused then redis.call('HSET', config, 'paused', paused) end
end
for i = 2, #ARGV, 2 do
  redis.call('HSET', config, ARGV[i], ARGV[i + 1])
end
return OK
