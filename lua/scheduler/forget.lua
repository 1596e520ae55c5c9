-- forget.lua: takes an upstream out of its account's cadence and requests. A fetch of it still
-- running goes on; its finish then schedules nothing (finish.lua reads the cadence).
-- KEYS[1]  <prefix>:{sched}:meta
-- ARGV[1]  account digest   ARGV[2] upstream ID
-- Returns: {"ok": true} it was scheduled, {"ok": false} it was not
-- Errors: none
assert(#ARGV == 2, 'forget: arity')
local upstream = ARGV[2]
local known = redis.call('ZREM', k('cadence'), upstream) == 1
redis.call('ZREM', k('priority'), upstream)
redis.call('HDEL', k('requests'), upstream)
redis.call('HDEL', k('pending'), upstream)
return ok(known)
