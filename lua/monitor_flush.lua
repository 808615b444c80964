--[[ Add one process's buffered monitor samples for one interval to the fleet's hashes.
  KEYS[1] interval  hash  dq:{ns}:monitor:<intervalStartMs>  field "<topic>\t<name>"
  KEYS[2] total     hash  dq:{ns}:monitor:total              same fields, no TTL
  ARGV[1] ttl_ms    of the interval hash (re-armed on every flush)
  ARGV[2..] groups of three: field, op, value; every op applies to both hashes
      op "i"  HINCRBY field value          (counters, bucket counts, integer ms sums)
      op "f"  HINCRBYFLOAT field value     (fractional ms sums of loop timings)
      op "m"  field = max(field, value)    (a missing field counts as -inf)
  Both keys carry the namespace hash tag {ns}: one Cluster slot.
  Returns: number of groups applied; BAD_ARGUMENT (nothing written) if ARGV[2..] is not
  groups of three, an op is unknown, or a ttl or value is not a number.
  Memory: grows Redis; its first write is HINCRBY or HSET (deny-oom), so over maxmemory it is
  refused whole and the process keeps its samples for a later flush. ]]
--@include outcome

local interval_key = KEYS[1]
local total_key = KEYS[2]
local ttl_ms = tonumber(ARGV[1])
local first_group = 2

-- All checks first: Redis does not roll back a script that fails halfway.
if ttl_ms == nil or ttl_ms <= 0 then
  return BAD_ARGUMENT
end
if (#ARGV - 1) % 3 ~= 0 then
  return BAD_ARGUMENT
end
for i = first_group, #ARGV, 3 do
  local op = ARGV[i + 1]
  if op ~= "i" and op ~= "f" and op ~= "m" then
    return BAD_ARGUMENT
  end
  if tonumber(ARGV[i + 2]) == nil then
    return BAD_ARGUMENT
  end
end

local function set_max(key, field, value)
  local current = redis.call("HGET", key, field)
  if not current or tonumber(value) > tonumber(current) then
    redis.call("HSET", key, field, value)
  end
end

local applied = 0
for i = first_group, #ARGV, 3 do
  local field, op, value = ARGV[i], ARGV[i + 1], ARGV[i + 2]
  if op == "i" then
    redis.call("HINCRBY", interval_key, field, value)
    redis.call("HINCRBY", total_key, field, value)
  elseif op == "f" then
    redis.call("HINCRBYFLOAT", interval_key, field, value)
    redis.call("HINCRBYFLOAT", total_key, field, value)
  else
    set_max(interval_key, field, value)
    set_max(total_key, field, value)
  end
  applied = applied + 1
end

if applied > 0 then
  redis.call("PEXPIRE", interval_key, ttl_ms)
end
return applied
