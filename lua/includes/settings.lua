--[[ The topic's effective settings: its config hash (setTopicConfig) over the server's
  defaults, which the caller passes as the last 9 ARGV in SETTING_NAMES order. The names are
  the table delayqueue/settings/topic_setting.py SETTINGS, in its order (Lua cannot read it;
  tests/core/test_lua_contract.py keeps the two equal). Booleans are 1 / 0. ]]
local SETTING_NAMES = {'ttlMillis', 'maxRetry', 'ackTimeoutMillis', 'redeliveryDelayMillis',
  'redeliveryBackoffMultiplier', 'redeliveryMaxDelayMillis', 'deadLetter',
  'deadLetterRetentionMillis', 'deadLetterMaxSize'}

local function topic_settings(config)
  local values = redis.call('HMGET', config, unpack(SETTING_NAMES))
  local first = #ARGV - #SETTING_NAMES
  local s = {}
  for i, name in ipairs(SETTING_NAMES) do
    s[name] = tonumber(values[i] or ARGV[first + i])
  end
  return s
end

-- The wait before a redelivery after `deliveries` deliveries:
-- min(redeliveryMaxDelayMillis, redeliveryDelayMillis * multiplier ^ (deliveries - 1)).
local function backoff(s, deliveries)
  local delay = s.redeliveryDelayMillis * s.redeliveryBackoffMultiplier ^ (deliveries - 1)
  return math.floor(math.min(s.redeliveryMaxDelayMillis, delay))
end
