-- renew.lua: a current claim's lease, to end a lease from now (seed 001's 续期).
-- KEYS[1]  <prefix>:{sched}:meta
-- ARGV[1]  account digest   ARGV[2] upstream ID   ARGV[3] token   ARGV[4] now (ms)
-- ARGV[5]  lease (ms)
-- Returns: {"ok": lease end (ms)}
-- Errors: lease_lost: the token is not the upstream's current claim; nothing changed
assert(#ARGV == 5, 'renew: arity')
local upstream, token, now, lease = ARGV[2], ARGV[3], tonum(ARGV[4]), tonum(ARGV[5])
if not current(upstream, token, now) then return fail('lease_lost') end
local ends = now + lease
redis.call('ZADD', k('running'), 'XX', ends, upstream)
redis.call('ZADD', k('cadence'), 'XX', 'GT', ends, upstream)  -- a later due time stands
return ok(ends)
