-- settle.lua: trimmed entries leave the unsettled set, those never applied counted as lost.
-- KEYS[1] the stream (lib.lua names the keys beside it: its unsettled set, its lost hash)
-- ARGV[1], ARGV[2], ...: pairs of entry ID and "1" (never applied) or "0" (applied before it
--          was trimmed), at most group.SETTLE_BATCH pairs
-- Returns: the entries counted as lost now
-- Errors: none
--
-- ZREM says which consumer settles an entry: two that look at once count it once.
assert(#ARGV % 2 == 0, 'settle: arity')
local lost = 0
for i = 1, #ARGV, 2 do
  if redis.call('ZREM', UNSETTLED, ARGV[i]) == 1 and ARGV[i + 1] == '1' then lost = lost + 1 end
end
if lost > 0 then redis.call('HINCRBY', LOST, 'total', lost) end
return lost
