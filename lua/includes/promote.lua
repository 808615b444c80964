--[[ Shared: move due messages from waiting to ready.
  Moves at most `limit` ids whose triggerTime <= now; ZREM decides, so two schedulers (or a
  scheduler and a pull) racing never move one id twice. A promoted message enters the expiry
  index here: a waiting message cannot expire (expireTime = triggerTime + ttl), so the index
  holds only ready and consuming messages and a large waiting backlog costs no entry in it.
  Returns moved count and a flat list of promotion gaps (now - triggerTime, ms) for the
  readyQueueTimeGap histogram. ]]
--@include message
local function promote(waiting, ready, expire, msg_prefix, now, limit)
  local due = redis.call('ZRANGEBYSCORE', waiting, '-inf', now, 'WITHSCORES', 'LIMIT', 0, limit)
  local moved, gaps = 0, {}
  for i = 1, #due, 2 do
    local id, trigger = due[i], due[i + 1]
    if redis.call('ZREM', waiting, id) == 1 then
      local key = msg_prefix .. id
      local expire_at = redis.call('HGET', key, 'e')
      if expire_at then
        redis.call('ZADD', ready, trigger, id)
        redis.call('ZADD', expire, expire_at, id)
        redis.call('HSET', key, 's', 2)
        moved = moved + 1
        gaps[#gaps + 1] = now - tonumber(trigger)
      end
    end
  end
  return moved, gaps
end
