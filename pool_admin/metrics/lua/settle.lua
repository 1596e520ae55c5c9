-- settle.lua: trimmed entries leave the unsettled set, those never applied counted as lost
-- (pool_admin/metrics/group.py).
-- KEYS[1] the unsettled set   KEYS[2] the lost-entries hash
-- ARGV: pairs of entry ID and "1" (never applied) or "0" (applied before it was trimmed)
-- Returns: the entries counted as lost now
-- Errors: none
--
-- ZREM says which consumer settles an entry: two that look at once count it once.
assert(#KEYS == 2 and #ARGV % 2 == 0, 'settle: arity')
local lost = 0
for i = 1, #ARGV, 2 do
  if redis.call('ZREM', KEYS[1], ARGV[i]) == 1 and ARGV[i + 1] == '1' then lost = lost + 1 end
end
if lost > 0 then redis.call('HINCRBY', KEYS[2], 'total', lost) end
return lost
