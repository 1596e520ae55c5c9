-- retire.lua: pending entries the stream trimmed leave the pending list for the unsettled set.
-- KEYS[1] the stream (lib.lua names the keys beside it)
-- ARGV[1] group   ARGV[2..] entry IDs (at most a batch: the caller's read)
-- Returns: how many were still pending (retired now)
-- Errors: none (XACK on a missing stream or group acknowledges nothing)
--
-- In one step: an entry another consumer's claim dropped meanwhile is in the set already, and
-- is not put there twice.
assert(#ARGV >= 2, 'retire: arity')
local retired = 0
for i = 2, #ARGV do
  if redis.call('XACK', STREAM, ARGV[1], ARGV[i]) == 1 then
    redis.call('ZADD', UNSETTLED, id_ms(ARGV[i]), ARGV[i])
    retired = retired + 1
  end
end
return retired
