--[[ Test probe: rewrite the records at these slots (ARGV) as storage format records-1 wrote
  them: no acceptance sequence (records-1 records are records-2 records without the optional
  sequence and group fields). The caller renames their waiting and ready members to bare
  slots.
  KEYS: the topic's 12 keys (includes/keys.lua). ]]
--@include keys
--@include message
for _, slot in ipairs(ARGV) do
  local m = load_slot(tk.msgs, slot)
  m.seq = 0
  save_message(tk.msgs, m)
end
return #ARGV
