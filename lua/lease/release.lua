-- release.lua: give the lease up, only if this holder holds it.
-- KEYS[1] <prefix>:{lease}:meta
-- ARGV[1] lease name   ARGV[2] holder   ARGV[3] now (caller clock, ms)
-- Returns: {"ok": true} when released, {"ok": false} when the holder did not hold it
-- Errors: none (a malformed call is an arity error)
assert(#KEYS == 1 and #ARGV == 3, 'release: arity')
local holder, now = ARGV[2], tonumber(ARGV[3])
local lease = current(now)
if not lease or lease.h ~= holder then return ok(false) end
redis.call('DEL', KEY)
return ok(true)
