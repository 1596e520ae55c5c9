-- acquire.lua: take the lease for a holder unless another holds it (its own holder renews it).
-- KEYS[1] <prefix>:{lease}:meta
-- ARGV[1] lease name   ARGV[2] holder   ARGV[3] now (caller clock, ms)   ARGV[4] ttl ms
-- Returns: {"ok": true} when the holder has it now, {"ok": false} when another holds it
-- Errors: none (a malformed call is an arity error)
assert(#KEYS == 1 and #ARGV == 4, 'acquire: arity')
local holder, now, ttl = ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])
local lease = current(now)
if lease and lease.h ~= holder then return ok(false) end
hold(holder, now, ttl)
return ok(true)
