--[[ The keys, by name: every topic script takes the same 19 keys in this order
  (TopicKeys.queues / SubscriptionKeys.queues in delayqueue/core/keys.py; a test keeps the
  two equal). KEYS[1..12] are the keys of the subscription the call works in (its
  "context"): the topic's own for the default subscription, or a named subscription's
  (<topic base>:s:<name>:<kind>); KEYS[13..19] are the topic's, whatever the context.
  KEYS[1]  waiting  zset  seq..slot -> triggerTime: accepted, not yet due (group fronts and
                          ungrouped messages only; includes/group.lua queue_member)
  KEYS[2]  ready    zset  seq..slot -> when it became ready
  KEYS[3]  ack      zset  slot -> ack deadline of the current delivery
  KEYS[4]  expire   zset  slot -> expireTime: ready, consuming and group-blocked messages
  KEYS[5]  dead     zset  slot -> when it died (dead letters kept for redrive)
  KEYS[6]  config   hash  the context's settings (setTopicConfig / setSubscriptionConfig)
  KEYS[7]  msgs     hash  slot -> record (includes/message.lua); a named subscription's
                          records hold its delivery state only, the body is the topic's
  KEYS[8]  ended    zset  slot -> end of retention
  KEYS[9]  seq      string  the topic's last acceptance sequence given (shared)
  KEYS[10] groups   hash  groupId -> slot of the group's front (its one message in waiting,
                          ready or ack)
  KEYS[11] blocked  zset  all scores 0, members groupId \0 trigger seq slot: the group's other
                          live messages, in the group's order (ZRANGEBYLEX)
  KEYS[12] held     zset  slot -> triggerTime: the same messages, by trigger time (counts)
  KEYS[13] bodies   hash  the topic's msgs: every message's record, body included
  KEYS[14] topic config  hash  the topic's settings (a subscription's fall back to them)
  KEYS[15] subs     hash  name -> "<creation seq> <createdTime>": the named subscriptions
  KEYS[16] fanout   zset  seq..slot -> triggerTime: messages still to hand to the named
                          subscriptions (includes/fanout.lua), one entry per message
  KEYS[17] refs     hash  slot -> how many named subscriptions keep an entry of the message
  KEYS[18] sexpire  zset  slot -> expireTime: messages handed to named subscriptions as bare
                          ready entries (no record there), for their expiry
  KEYS[19] due     the due-time record (includes/message.lua due_lowered): on a Cluster the
                  topic's own string <topic base>:due, the lowest due time it has given the
                  namespace due index since the scheduler last wrote the exact one; on one
                  Redis (standalone, Sentinel) the namespace due index itself, zset
                  topic -> due time, which the script lowers in the same call
  A named subscription's keys all carry the topic's hash tag: one Cluster slot. Scripts that
  work in every subscription (fan-out, deleteMsg, the scheduler's) build the other
  subscriptions' key names from KEYS[13] (subscription_keys), in that same slot. ]]
local tk = {waiting = KEYS[1], ready = KEYS[2], ack = KEYS[3], expire = KEYS[4],
  dead = KEYS[5], config = KEYS[6], msgs = KEYS[7], ended = KEYS[8], seq = KEYS[9],
  groups = KEYS[10], blocked = KEYS[11], held = KEYS[12], bodies = KEYS[13],
  topic_config = KEYS[14], subs = KEYS[15], fanout = KEYS[16], refs = KEYS[17],
  sexpire = KEYS[18]}
-- KEYS[19]: the topic's due record on a Cluster, or (one Redis) the namespace due index.
tk.due = KEYS[19]
local CONTEXT_KINDS = {'waiting', 'ready', 'ack', 'expire', 'dead', 'config', 'msgs', 'ended',
  'groups', 'blocked', 'held'}
-- The topic's key prefix ("<prefix>:{<ns>:<topic>}"), from its msgs key.
local TOPIC_BASE = string.sub(KEYS[13], 1, -6)
-- Whether KEYS[19] is the namespace due index ("<prefix>:{<ns>}:due", one Redis), and the
-- topic's member there (TOPIC_BASE is "<prefix>:{<ns>:<topic>}").
local DUE_DIRECT = string.sub(tk.due, 1, #TOPIC_BASE) ~= TOPIC_BASE
local DUE_TOPIC = DUE_DIRECT and string.sub(TOPIC_BASE, #tk.due - 5 + 2, -2)
-- Hints are sharded on a Cluster (KEYS[19] is the topic's own due record there) of Redis
-- >= 7: SPUBLISH on the topic's own channel (TopicKeys.hint_channel, in the topic's slot),
-- heard by the processes subscribed to it only; elsewhere a classic PUBLISH on the
-- namespace hint channel, heard by every process.
local SHARDED_HINTS = not DUE_DIRECT and (redis.REDIS_VERSION_NUM or 0) >= 0x070000

-- Tell every process waiting on the topic that k messages became ready: "<k> <topic>".
local function publish_hint(channel, topic, k)
  if SHARDED_HINTS then
    return redis.call('SPUBLISH', TOPIC_BASE .. ':hint', k .. ' ' .. topic)
  end
  return redis.call('PUBLISH', channel, k .. ' ' .. topic)
end
-- The named subscription this call works in, or false for the default one.
tk.sub = tk.msgs ~= tk.bodies and string.match(tk.msgs, ':s:([^:]+):msgs$') or false
-- The context this call was made in (use_context switches, this restores).
local CALL_CONTEXT = {sub = tk.sub}
for _, kind in ipairs(CONTEXT_KINDS) do CALL_CONTEXT[kind] = tk[kind] end

-- The key names of a context: a named subscription's, or (name false) the topic's own.
local function context_keys(name)
  if not name then
    local keys = {sub = false}
    for _, kind in ipairs(CONTEXT_KINDS) do keys[kind] = TOPIC_BASE .. ':' .. kind end
    return keys
  end
  local keys = {sub = name}
  for _, kind in ipairs(CONTEXT_KINDS) do
    keys[kind] = TOPIC_BASE .. ':s:' .. name .. ':' .. kind
  end
  return keys
end

-- Work in that context from now on (every include reads tk.<kind> when it runs).
local function use_context(keys)
  for _, kind in ipairs(CONTEXT_KINDS) do tk[kind] = keys[kind] end
  tk.sub = keys.sub
end

-- A call in a named subscription that does not exist: refused before anything is read.
if tk.sub and redis.call('HEXISTS', tk.subs, tk.sub) == 0 then
  return redis.error_reply('NOSUBSCRIPTION ' .. tk.sub)
end
