--[[ Acknowledge deliveries, each on its own: consuming (3) -> acked (4).
  One call takes one ack or many (ackMsg is one; ackMsgBatch sends runs of acks in calls of
  up to 100).
  A late ack of a message given back after an ack timeout or a nack (ready (2), or waiting
  (1) for a delayed redelivery, delivered before and not yet redelivered) is accepted too:
  it saves a duplicate delivery.
  KEYS: the 19 keys (includes/keys.lua).
  ARGV[1] now_ms  ARGV[2] end_life_ms  ARGV[3] hint channel ('' = publish nothing)
  ARGV[4] topic  ARGV[5] n, the number of acks
  then n times: msg_id, receipt ('' = none: camellia's rules)
  then the server's default settings (includes/settings.lua; read only when an ack ends a
  message: the topic's dedupWindowMillis keeps its record at least that long)
  An acked group head releases its group: the group's next message becomes its front.
  Returns one reply per ack, in order: {outcome, fields, lowered_due} (or, for an ack whose own writes
  failed in Lua, that error reply in its place; the others stand)
    outcome  OK acked; ACKED_LATE acked after it was given back; ALREADY_ACKED (with a
             receipt: only the one that acked it);
             NO_MESSAGE no such message, or it ended otherwise (404);
             NOT_DELIVERED waiting or ready and never delivered (400);
             STALE_RECEIPT the receipt is not the latest delivery's (409), also when the
             message was never delivered since (a replace, send.lua, began it again)
    fields   {m, p, t, e, r, n, s, a, c, g} after the ack, or {}
    lowered_due  the topic's new due time if this call brought it forward (a group's next
             message put into waiting, an ended record's purge), the same in every reply
             of the call, else -1
  Memory: drains (first write ZREM; the record keeps its size, its queue entry becomes an
  ended entry): runs over maxmemory.
  Publishes "<k> <topic>" when the acks made k of their groups' next messages ready. ]]
--@include settings
--@include group
local now, end_life, channel, topic = tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3], ARGV[4]
local n = tonumber(ARGV[5])
local window = nil   -- the topic's dedupWindowMillis, read by the first ack that ends one

local function dedup_window()
  if not window then window = topic_settings(tk.config, tk.topic_config).dedupWindowMillis end
  return window
end

local function ack_one(msg_id, receipt)
  local m = retained(find_message(tk.msgs, msg_id), tk.ended, now)
  if not m then return {NO_MESSAGE, {}, -1} end
  local status, deliveries = tonumber(m[STATUS]), tonumber(m[DELIVERIES])
  if status > Status.ACKED then return {NO_MESSAGE, m, -1} end
  -- A receipt for a message not delivered since is stale: the delivery it names was
  -- replaced (sendMsg onDuplicate=replace), not never made.
  if receipt ~= '' and status < Status.CONSUMING and deliveries == 0 then
    return {STALE_RECEIPT, shown_status(m, now), -1}
  end
  if status < Status.CONSUMING and deliveries == 0 then
    return {NOT_DELIVERED, shown_status(m, now), -1}
  end
  if stale_receipt(m, receipt) then return {STALE_RECEIPT, m, -1} end
  if status == Status.ACKED then return {ALREADY_ACKED, m, -1} end

  end_message(m, Status.ACKED, now, end_life, dedup_window())
  return {status == Status.CONSUMING and OK or ACKED_LATE, m, -1}
end

local replies = each_on_its_own(n, function(i)
  return ack_one(ARGV[4 + 2 * i], ARGV[5 + 2 * i])
end)
publish_advanced(channel, topic, now)
return with_due_lowered(replies)
