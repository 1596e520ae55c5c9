-- claim.lua: the usage stream's consumer claims entries other consumers left pending too long.
-- KEYS[1] the stream (lib.lua names the keys beside it)
-- ARGV[1] group   ARGV[2] consumer   ARGV[3] min idle ms   ARGV[4] start ID   ARGV[5] count
-- Returns: {cursor, entries}: as XAUTOCLAIM gives them
-- Errors: NOGROUP (no stream or no such group)
--
-- Redis 7.0's XAUTOCLAIM drops the pending entries the stream trimmed (its third reply): they
-- go into the unsettled set in the same step, scored by their time, so that none is forgotten
-- between the claim and the count of what was lost (group.settle). Bounded by the count: the
-- trimmed IDs XAUTOCLAIM gives are at most that many.
assert(#ARGV == 5, 'claim: arity')
local reply = redis.call('XAUTOCLAIM', STREAM, ARGV[1], ARGV[2], ARGV[3], ARGV[4],
                         'COUNT', ARGV[5])
for _, id in ipairs(reply[3] or {}) do
  redis.call('ZADD', UNSETTLED, id_ms(id), id)
end
return {reply[1], reply[2]}
