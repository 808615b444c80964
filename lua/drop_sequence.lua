--[[ Drop the acceptance sequence of a topic that holds nothing else, for the recycler: a
  sequence orders live messages only, so an empty topic can start again from 1. Atomic with
  the check, so a send racing the recycler either finds its sequence or starts a new one on an
  empty topic.
  KEYS: the 19 keys (includes/keys.lua).
  Returns: OK dropped (or there was none); KEPT the topic holds something.
  Memory: shrinks. ]]
--@include keys
--@include outcome
for _, key in ipairs({tk.waiting, tk.ready, tk.ack, tk.expire, tk.dead, tk.config, tk.msgs,
    tk.ended, tk.groups, tk.blocked, tk.held, tk.subs, tk.fanout, tk.refs, tk.sexpire}) do
  if redis.call('EXISTS', key) == 1 then return KEPT end
end
redis.call('DEL', tk.seq)
if not DUE_DIRECT then redis.call('DEL', tk.due) end   -- its due record, on a Cluster
return OK
