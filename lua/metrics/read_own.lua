-- read_own.lua: the usage stream's consumer reads its own pending entries again.
-- KEYS[1] the stream (lib.lua names the keys beside it)
-- ARGV[1] group   ARGV[2] consumer   ARGV[3] most entries   ARGV[4] "1": count a delivery
-- Returns: {{id, fields or false (trimmed from the stream, still pending), deliveries}, ...}
--          in ID order
-- Errors: NOGROUP (no stream or no such group)
--
-- XREADGROUP with ID 0 counts a delivery each time; a consumer that reads again after every
-- failure would bring good entries to the dead-letter limit during an outage in which its
-- probe passes (a read-only primary, a full disk). So a delivery is counted only when asked
-- (pool_admin/metrics/phases.py decides when), and the entries are otherwise touched with
-- XCLAIM ... JUSTID (their idle time restarts, so no other consumer claims them from a live
-- one; no delivery counted). A trimmed entry is not claimed (XCLAIM would drop it from the
-- pending list): the caller retires it. Bounded by ARGV[3] entries.
assert(#ARGV == 4, 'read_own: arity')
local group, consumer = ARGV[1], ARGV[2]
local count, counted = tonumber(ARGV[3]), ARGV[4] == '1'
local out = {}
for _, p in ipairs(redis.call('XPENDING', STREAM, group, '-', '+', count, consumer)) do
  local id, deliveries = p[1], p[4]
  local entry = redis.call('XRANGE', STREAM, id, id)[1]
  if entry then
    if counted then
      redis.call('XCLAIM', STREAM, group, consumer, 0, id)
      deliveries = deliveries + 1
    else
      redis.call('XCLAIM', STREAM, group, consumer, 0, id, 'JUSTID')
    end
    out[#out + 1] = {id, entry[2], deliveries}
  else
    out[#out + 1] = {id, false, deliveries}
  end
end
return out
