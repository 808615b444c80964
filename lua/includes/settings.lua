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
-- A subscription's push settings (delayqueue/settings/topic_setting.py PUSH_SETTINGS), read in
-- the same HMGET: its own only, never the topic's (the default subscription's are in the
-- topic's hash). s.pushUrl is true when set; the numbers are nil when the server's apply.
local PUSH_FIELDS = {'pushUrl', 'pushConcurrency', 'pushTimeoutMillis'}
local OWN = 1 + #PUSH_FIELDS   -- paused and the push fields precede the settings
local CONFIG_FIELDS = {PAUSED, unpack(PUSH_FIELDS)}
for _, name in ipairs(SETTING_NAMES) do CONFIG_FIELDS[#CONFIG_FIELDS + 1] = name end

-- `parent`: the topic's config hash when `config` is a named subscription's (its settings
-- resolve subscription -> topic -> server; it is paused when either is); else equal to it.
local function topic_settings(config, parent)
  local values = redis.call('HMGET', config, unpack(CONFIG_FIELDS))
  local inherited = parent and parent ~= config and
    redis.call('HMGET', parent, unpack(CONFIG_FIELDS)) or {}
  local first = #ARGV - #SETTING_NAMES
  local s = {paused = values[1] == '1' or inherited[1] == '1',
    pushUrl = values[2] ~= false and values[2] ~= '',
    pushConcurrency = tonumber(values[3]), pushTimeoutMillis = tonumber(values[4])}
  for i, name in ipairs(SETTING_NAMES) do
    s[name] = tonumber(values[i + OWN] or inherited[i + OWN] or ARGV[first + i])
  end
  return s
end

-- The wait before a redelivery after `deliveries` deliveries:
-- min(redeliveryMaxDelayMillis, redeliveryDelayMillis * multiplier ^ (deliveries - 1)).
local function backoff(s, deliveries)
  local delay = s.redeliveryDelayMillis * s.redeliveryBackoffMultiplier ^ (deliveries - 1)
  return math.floor(math.min(s.redeliveryMaxDelayMillis, delay))
end
