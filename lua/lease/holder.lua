-- holder.lua: who holds the lease now, if anyone (for the console and the tests).
-- KEYS[1] <prefix>:{lease}:meta
-- ARGV[1] lease name   ARGV[2] now (caller clock, ms)
-- Returns: {"ok": holder} or {"ok": ""} when no one holds it
-- Errors: none (a malformed call is an arity error)
assert(#KEYS == 1 and #ARGV == 2, 'holder: arity')
local lease = current(tonumber(ARGV[2]))
if not lease then return ok('') end
return ok(lease.h)
