-- schedule.lua: puts an upstream in its account's cadence, due at a time, unless it is there.
-- KEYS[1]  <prefix>:{sched}:meta
-- ARGV[1]  account digest   ARGV[2] upstream ID   ARGV[3] due (ms)
-- ARGV[4]  most upstreams one account may have scheduled
-- Returns: {"ok": true} added, {"ok": false} there already (its due time unchanged)
-- Errors: invalid_request (reason too_many_upstreams): nothing changed
assert(#ARGV == 4, 'schedule: arity')
local upstream, due, most = ARGV[2], tonum(ARGV[3]), tonum(ARGV[4])
if redis.call('ZSCORE', k('cadence'), upstream) then return ok(false) end
if redis.call('ZCARD', k('cadence')) >= most then
  return fail('invalid_request', 'too_many_upstreams')
end
-- Still running (forgotten, then scheduled again): not due before its lease ends.
local ends = redis.call('ZSCORE', k('running'), upstream)
if ends and tonum(ends) > due then due = tonum(ends) end
redis.call('ZADD', k('cadence'), due, upstream)
return ok(true)
