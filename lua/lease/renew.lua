-- renew.lua: extend the lease while the holder still holds it.
-- KEYS[1] <prefix>:{lease}:meta
-- ARGV[1] lease name   ARGV[2] holder   ARGV[3] now (caller clock, ms)   ARGV[4] ttl ms
-- Returns: {"ok": true} when extended, {"ok": false} when lost (ended, or another holds it)
-- Errors: none (a malformed call is an arity error)
assert(#KEYS == 1 and #ARGV == 4, 'renew: arity')
local holder, now, ttl = ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])
local lease = current(now)
if not lease or lease.h ~= holder then return ok(false) end
hold(holder, now, ttl)
return ok(true)
