-- claim.lua: the usage stream's consumer claims entries other consumers left pending too long.
-- KEYS[1] the stream (lib.lua names the keys beside it)
-- ARGV[1] group   ARGV[2] consumer   ARGV[3] min idle ms   ARGV[4] start ID   ARGV[5] count
-- Returns: {cursor, {{id, fields, deliveries}, ...}}: XAUTOCLAIM's cursor and entries, each
--          with its delivery count (this claim's included), as read_own.lua gives them
-- Errors: NOGROUP (no stream or no such group)
--
-- Redis 7.0's XAUTOCLAIM drops the pending entries the stream trimmed (its third reply): they
-- go into the unsettled set in the same step, scored by their time, so that none is forgotten
-- between the claim and the count of what was lost (group.settle). Each claimed entry's count
-- is read in the same step too, so the consumer checks it against its limit as it does for its
-- own entries. Bounded by the count: XAUTOCLAIM gives at most that many entries and trimmed IDs.
assert(#ARGV == 5, 'claim: arity')
local group = ARGV[1]
local reply = redis.call('XAUTOCLAIM', STREAM, group, ARGV[2], ARGV[3], ARGV[4],
                         'COUNT', ARGV[5])
for _, id in ipairs(reply[3] or {}) do
  redis.call('ZADD', UNSETTLED, id_ms(id), id)
end
local out = {}
for _, entry in ipairs(reply[2]) do
  local pending = redis.call('XPENDING', STREAM, group, entry[1], entry[1], 1)[1]
  out[#out + 1] = {entry[1], entry[2], pending and pending[4] or 1}
end
return {reply[1], out}
