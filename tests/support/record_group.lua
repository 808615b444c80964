--[[ Test probe: the groupId of the record at a slot (ARGV[1]), false when it has none or
  there is no record. KEYS: the topic's 12 keys (includes/keys.lua). ]]
--@include keys
--@include message
local m = load_slot(tk.msgs, ARGV[1])
return m and m[GROUP] or false
