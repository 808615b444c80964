--[[ Test probe: rewrite the records at these slots (ARGV) as storage format records-2 wrote
  them: no end time (records-2 records are records-3 records without the optional end time,
  flag bit 5).
  KEYS: the topic's 12 keys (includes/keys.lua). ]]
--@include keys
--@include message
for _, slot in ipairs(ARGV) do
  local m = load_slot(tk.msgs, slot)
  m.ended_at = nil
  save_message(tk.msgs, m)
end
return #ARGV
