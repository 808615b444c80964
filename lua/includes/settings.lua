--[[ The topic's effective settings: its config hash (setTopicConfig) over the server's
  defaults, which the caller passes as the last 13 ARGV in SETTING_NAMES order. The names are
  the table delayqueue/settings/topic_setting.py SETTINGS, in its order (Lua cannot read it;
  tests/core/test_lua_contract.py keeps the two equal). Booleans are 1 / 0. ]]
local SETTING_NAMES = {'ttlMillis', 'maxRetry', 'ackTimeoutMillis', 'redeliveryDelayMillis',
  'redeliveryBackoffMultiplier', 'redeliveryMaxDelayMillis', 'deadLetter',
  'deadLetterRetentionMillis', 'deadLetterMaxSize', 'delayMillis', 'maxBacklog',
  'dedupWindowMillis', 'defaultSubscription'}
-- Not a setting but the topic's state, kept in the same hash (pauseTopic): read in the same
-- HMGET, never reset by setTopicConfig's reset.
local PAUSED = 'paused'

-- `parent`: the topic's config hash when `config` is a named subscription's (its settings
-- resolve subscription -> topic -> server; it is paused when either is); else equal to it.
local function topic_settings(config, parent)
  local values = redis.call('HMGET', config, PAUSED, unpack(SETTING_NAMES))
  local inherited = parent and parent ~= config and
    redis.call('HMGET', parent, PAUSED, unpack(SETTING_NAMES)) or {}
  local first = #ARGV - #SETTING_NAMES
  local s = {paused = values[1] == '1' or inherited[1] == '1'}
  for i, name in ipairs(SETTING_NAMES) do
    s[name] = tonumber(values[i + 1] or inherited[i + 1] or ARGV[first + i])
  end
  return s
end

-- The wait before a redelivery after `deliveries` deliveries:
-- min(redeliveryMaxDelayMillis, redeliveryDelayMillis * multiplier ^ (deliveries - 1)).
local function backoff(s, deliveries)
  local delay = s.redeliveryDelayMillis * s.redeliveryBackoffMultiplier ^ (deliveries - 1)
  return math.floor(math.min(s.redeliveryMaxDelayMillis, delay))
end
