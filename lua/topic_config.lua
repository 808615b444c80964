--[[ Set a topic's own settings (validated by the caller): reset drops every topic value
  first; the given ones are then written. One script, so a reset and the new values land
  together.
  KEYS[1] waiting  KEYS[2] ready  KEYS[3] ack  KEYS[4] expire  KEYS[5] dead  (zsets)
  KEYS[6] config   hash  (only config is written)
  KEYS[7] msgs     hash   KEYS[8] ended  zset  (unused; every topic script takes the same keys)
  ARGV[1] reset (1 / 0)  ARGV[2..] setting, value pairs
  Returns: OK; BAD_ARGUMENT (nothing written) if ARGV[2..] is not pairs.
  Memory: grows Redis a little; its first write is DEL or HSET. ]]
--@include outcome
local config = KEYS[6]
local reset = ARGV[1] == '1'

if (#ARGV - 1) % 2 ~= 0 then return BAD_ARGUMENT end
if reset then redis.call('DEL', config) end
for i = 2, #ARGV, 2 do
  redis.call('HSET', config, ARGV[i], ARGV[i + 1])
end
return OK
