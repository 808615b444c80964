--[[ The topic's keys, by name: every topic script takes the same 12 keys in this order
  (TopicKeys.queues in delayqueue/core/keys.py; a test keeps the two equal).
  KEYS[1]  waiting  zset  seq..slot -> triggerTime: accepted, not yet due (group fronts and
                          ungrouped messages only; includes/group.lua queue_member)
  KEYS[2]  ready    zset  seq..slot -> when it became ready
  KEYS[3]  ack      zset  slot -> ack deadline of the current delivery
  KEYS[4]  expire   zset  slot -> expireTime: ready, consuming and group-blocked messages
  KEYS[5]  dead     zset  slot -> when it died (dead letters kept for redrive)
  KEYS[6]  config   hash  the topic's settings (setTopicConfig)
  KEYS[7]  msgs     hash  slot -> record (includes/message.lua)
  KEYS[8]  ended    zset  slot -> end of retention
  KEYS[9]  seq      string  the last acceptance sequence given
  KEYS[10] groups   hash  groupId -> slot of the group's front (its one message in waiting,
                          ready or ack)
  KEYS[11] blocked  zset  all scores 0, members groupId \0 trigger seq slot: the group's other
                          live messages, in the group's order (ZRANGEBYLEX)
  KEYS[12] held     zset  slot -> triggerTime: the same messages, by trigger time (counts) ]]
local tk = {waiting = KEYS[1], ready = KEYS[2], ack = KEYS[3], expire = KEYS[4],
  dead = KEYS[5], config = KEYS[6], msgs = KEYS[7], ended = KEYS[8], seq = KEYS[9],
  groups = KEYS[10], blocked = KEYS[11], held = KEYS[12]}
