--[[ Hand out up to `batch` ready messages: ready (2) -> consuming (3), in the order they
  became ready. Promotes this topic's due messages first, so a consumer arriving at the due
  time never waits for a scheduler. A message past its expireTime, or past its deliveries,
  is never handed out: it ends (5 if never delivered, else 6, a dead letter).
  Each delivery gets a new receipt (field c): only it can ack, nack or extend the delivery.
  KEYS[1] waiting  zset  msgId -> triggerTime
  KEYS[2] ready    zset  msgId -> when it became ready
  KEYS[3] ack      zset  msgId -> ack deadline
  KEYS[4] expire   zset  msgId -> expireTime
  KEYS[5] dead     zset  msgId -> when it died
  KEYS[6] config   hash  the topic's settings (read only)
  ARGV[1] msg_prefix (same hash tag)  ARGV[2] now_ms  ARGV[3] batch (<= 1000)
  ARGV[4] ack_timeout_ms (-1: the topic's)  ARGV[5] end_life_ms  ARGV[6] promote limit
  ARGV[7] hint channel  ARGV[8] topic  ARGV[9..17] the server's default settings
  Returns: {messages, promoted, gaps, ended, next_trigger, ready_left, lowered_due, dead}
    messages     list of {msgId, m, p, t, e, r, n, s, a, c} as stored after the pull
    promoted     moved waiting -> ready by this call; gaps: their promotion gaps (ms)
    ended        messages ended here (expired or out of deliveries) instead of handed out
    next_trigger triggerTime of the earliest waiting message, -1 if none
    ready_left   ready messages still queued after this pull
    lowered_due  the topic's new due time if this pull brought it forward, else -1
    dead         how many of the ended became dead letters
  Memory: drains (first write ZREM or ZPOPMIN): runs over maxmemory, so a full Redis drains.
  Publishes "<ready_left> <topic>" when it promoted messages it did not hand out, so
  consumers held on other processes take them. ]]
--@include promote
--@include dead_letter
local waiting, ready, ack, expire, dead, config =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local msg_prefix, now = ARGV[1], tonumber(ARGV[2])
local batch, ack_timeout = tonumber(ARGV[3]), tonumber(ARGV[4])
local end_life, promote_limit = tonumber(ARGV[5]), tonumber(ARGV[6])
local channel, topic = ARGV[7], ARGV[8]

local s = topic_settings(config)
if ack_timeout < 0 then ack_timeout = s.ackTimeoutMillis end
local before = due_at(waiting, ack, expire)
local promoted, gaps = promote(waiting, ready, expire, msg_prefix, now, promote_limit)

local messages, ended, dead_lettered = {}, 0, 0
-- Bounded work: skipping dead entries costs at most `batch` extra pops per call.
local pops_left = batch * 2
while #messages < batch and pops_left > 0 do
  local popped = redis.call('ZPOPMIN', ready)
  if not popped[1] then break end
  pops_left = pops_left - 1
  local id = popped[1]
  local key = msg_prefix .. id
  local m = read_message(key)
  if not m then
    redis.call('ZREM', expire, id)
  else
    local deliveries, max_retry = tonumber(m[6]), tonumber(m[5])
    if now >= tonumber(m[4]) or deliveries >= max_retry + 1 then
      redis.call('ZREM', expire, id)
      if deliveries == 0 then
        end_message(key, 5, end_life)
      else
        dead_lettered = dead_lettered + end_exhausted(key, id, dead, msg_prefix, now, end_life, s)
      end
      ended = ended + 1
    else
      local receipt = string.format('%x.%x', now, deliveries + 1)
      redis.call('HSET', key, 'n', deliveries + 1, 's', 3, 'c', receipt)
      redis.call('ZADD', ack, now + ack_timeout, id)
      m[6], m[7], m[9] = tostring(deliveries + 1), '3', receipt
      table.insert(m, 1, id)
      messages[#messages + 1] = m
    end
  end
end

local ready_left = redis.call('ZCARD', ready)
if promoted > 0 and ready_left > 0 then
  redis.call('PUBLISH', channel, ready_left .. ' ' .. topic)
end
local head = redis.call('ZRANGE', waiting, 0, 0, 'WITHSCORES')
local next_trigger = head[2] and tonumber(head[2]) or -1
return {messages, promoted, gaps, ended, next_trigger, ready_left,
  lowered_due(before, waiting, ack, expire), dead_lettered}
