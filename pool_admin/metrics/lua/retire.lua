-- retire.lua: pending entries the stream trimmed leave the pending list for the unsettled set
-- (pool_admin/metrics/group.py).
-- KEYS[1] the stream   KEYS[2] its unsettled set
-- ARGV[1] group   ARGV[2..] entry IDs
-- Returns: how many were still pending (retired now)
-- Errors: none (XACK on a missing stream or group acknowledges nothing)
--
-- In one step: an entry another consumer's claim dropped meanwhile is in the set already, and
-- is not put there twice.
assert(#KEYS == 2 and #ARGV >= 2, 'retire: arity')
local retired = 0
for i = 2, #ARGV do
  if redis.call('XACK', KEYS[1], ARGV[1], ARGV[i]) == 1 then
    redis.call('ZADD', KEYS[2], tonumber(string.match(ARGV[i], '^(%d+)-')), ARGV[i])
    retired = retired + 1
  end
end
return retired
