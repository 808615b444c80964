--[[ Delete a named subscription (deleteSubscription): from this call on it receives nothing
  and answers as unknown; its keys move at once to the dropping name
  <topic base>:sd:<drop id>:<kind>, so a subscription created again with the same name starts
  empty, and subscription_drop.lua frees them in bounded slices (each message it held lets
  go of the topic's record: unref).
  KEYS: the 19 keys (includes/keys.lua), in the named subscription's context.
  ARGV[1] drop id (unique: the caller's)
  Returns: OK. (An unknown subscription is refused by includes/keys.lua before this runs.)
  Memory: drains (first write HDEL). ]]
--@include keys
--@include outcome
local drop_id = ARGV[1]

redis.call('HDEL', tk.subs, tk.sub)
for _, kind in ipairs(CONTEXT_KINDS) do
  if redis.call('EXISTS', tk[kind]) == 1 then
    redis.call('RENAME', tk[kind], TOPIC_BASE .. ':sd:' .. drop_id .. ':' .. kind)
  end
end
return OK
