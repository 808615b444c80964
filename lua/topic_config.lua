--[[ Set a context's own settings (validated by the caller): a reset first removes the
  fields the caller names (setTopicConfig: every topic setting, so neither the topic's pause,
  which is state, nor its default subscription's push settings); the given ones are then
  written. One script, so a reset and the new values land together.
  KEYS: the 19 keys (includes/keys.lua); only config is written.
  ARGV[1] n: how many field names follow to remove first (0: no reset)
  ARGV[2 .. n+1] those fields  ARGV[n+2 ..] setting, value pairs
  Returns: OK; BAD_ARGUMENT (nothing written) if the rest is not pairs.
  Memory: grows Redis a little; its first write is HDEL or HSET. ]]
--@include keys
--@include outcome
local config = tk.config
local dropped = tonumber(ARGV[1])
local first = dropped + 2

if not dropped or #ARGV < dropped + 1 or (#ARGV - first + 1) % 2 ~= 0 then
  return BAD_ARGUMENT
end
if dropped > 0 then
  redis.call('HDEL', config, unpack(ARGV, 2, dropped + 1))
end
for i = first, #ARGV, 2 do
  redis.call('HSET', config, ARGV[i], ARGV[i + 1])
end
return OK
