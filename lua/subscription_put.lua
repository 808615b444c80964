--[[ Create a named subscription (createSubscription), or find the one of that name.
  It receives every message accepted after this call: its creation sequence is the topic's
  last acceptance sequence now, and fan_out (includes/fanout.lua) hands it only messages with
  a later one.
  KEYS: the 19 keys (includes/keys.lua), in the topic's own context; subs is written.
  ARGV[1] name  ARGV[2] now_ms  ARGV[3] the most named subscriptions a topic may have
  Returns: {outcome, created_time}
    outcome  OK created; DUPLICATE it existed (created_time: its own); BACKLOG (nothing
             written) the topic has the most subscriptions already
  Memory: grows Redis by one hash field (first write HSET). ]]
--@include keys
--@include outcome
local name, now, most = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])

local existing = redis.call('HGET', tk.subs, name)
if existing then return {DUPLICATE, tonumber(string.match(existing, ' (%d+)$'))} end
if redis.call('HLEN', tk.subs) >= most then return {BACKLOG, -1} end
local seq = tonumber(redis.call('GET', tk.seq) or '0')
redis.call('HSET', tk.subs, name, seq .. ' ' .. now)
return {OK, now}
